package node

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// What the status page and the scrape-time collectors read from a node.
// It is read-only: nothing here changes a log or a consumer's progress,
// and the owners' locks are never taken.

// nodeSnapshot is a node's state at one moment.
type nodeSnapshot struct {
	listen    string
	dataDir   string
	topics    []topicSnapshot
	transport quic.Stats
	parked    int
	maxParked int
	diskFree  uint64
	diskTotal uint64
}

type topicSnapshot struct {
	name  string
	id    fence.TopicID
	cfg   wire.TopicConfig
	parts []partitionSnapshot
}

type partitionSnapshot struct {
	index     uint32
	state     owner.LogState
	size      int64 // -1: unknown
	stats     engine.PartitionStats
	hasStats  bool // the storage keeps stats (the engine does)
	consumers []consumerSnapshot
}

// consumerSnapshot is one bookmark on a partition, resolved in the
// partition's current history.
type consumerSnapshot struct {
	name      string
	kind      string // "consumer" or "group"
	committed owner.Bookmark
	position  uint64
	lag       uint64
}

// snapshotDepth says how much a snapshot reads.
type snapshotDepth uint8

const (
	// offsetsOnly reads the partitions' states and counters: what the
	// throughput sampler needs.
	offsetsOnly snapshotDepth = iota
	// everything also reads sizes on disk, disk usage and every bookmark
	// (a metadata scan per partition).
	everything
)

// snapshot reads the node's state.
func (n *Node) snapshot(depth snapshotDepth) nodeSnapshot {
	s := nodeSnapshot{
		listen:    n.Addr(),
		dataDir:   n.cfg.DataDir,
		transport: n.Stats(),
		parked:    len(n.parked),
		maxParked: cap(n.parked),
	}
	if depth == everything {
		if u, err := n.cfg.FS.GetDiskUsage(n.cfg.DataDir); err == nil {
			s.diskFree, s.diskTotal = u.AvailBytes, u.TotalBytes
		}
	}
	for _, t := range n.topicList() {
		ts := topicSnapshot{name: t.name, id: t.id, cfg: t.cfg}
		for i, l := range t.logs {
			ps := partitionSnapshot{index: uint32(i), state: l.State(), size: -1}
			ps.stats, ps.hasStats = logStats(l)
			if depth == everything {
				ps.size = n.partitionSize(t.id, i)
				ps.consumers = consumersOf(l, ps.state)
			}
			ts.parts = append(ts.parts, ps)
		}
		s.topics = append(s.topics, ts)
	}
	return s
}

// partitionSize is the size of a partition's files when the node runs on
// the storage engine (its directory layout: topics/<topic id>/<index>/),
// -1 otherwise.
func (n *Node) partitionSize(id fence.TopicID, index int) int64 {
	if n.cfg.Storage != nil {
		return -1
	}
	fs := n.cfg.FS
	dir := fs.PathJoin(n.cfg.DataDir, "topics", id.String(), strconv.Itoa(index))
	names, err := fs.List(dir)
	if err != nil {
		return -1
	}
	var total int64
	for _, name := range names {
		if fi, err := fs.Stat(fs.PathJoin(dir, name)); err == nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
	}
	return total
}

// logStats returns the storage engine's counters of a partition log;
// false for storages that keep none.
func logStats(l owner.PartitionLog) (engine.PartitionStats, bool) {
	if o, ok := l.(orderedLog); ok {
		l = o.PartitionLog
	}
	if el, ok := l.(owner.EngineLog); ok {
		return el.Partition().Stats(), true
	}
	return engine.PartitionStats{}, false
}

// bookmarkLister is a log that can list its bookmarks (test storages).
type bookmarkLister interface {
	Bookmarks(fn func(consumer string, b owner.Bookmark) error) error
}

// listBookmarks calls fn for every bookmark stored on the log.
func listBookmarks(l owner.PartitionLog, fn func(consumer string, b owner.Bookmark) error) (err error) {
	if o, ok := l.(orderedLog); ok {
		l = o.PartitionLog
	}
	// A status read racing the storage's close must not take the node
	// down: a closed metadata store panics on new iterators.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("node: listing bookmarks: %v", p)
		}
	}()
	switch l := l.(type) {
	case owner.EngineLog:
		return l.Partition().Bookmarks(func(c string, b engine.Bookmark) error {
			return fn(c, owner.Bookmark{Offset: b.Offset, History: b.History})
		})
	case bookmarkLister:
		return l.Bookmarks(fn)
	}
	return nil
}

// consumersOf resolves every bookmark of a log in its current history.
// Bookmark keys are the owner's: "c/<name>" for named consumers and
// "g/<group>" for groups.
func consumersOf(l owner.PartitionLog, st owner.LogState) []consumerSnapshot {
	var out []consumerSnapshot
	var lineage []fence.HistoryTransition
	p := fence.Partition{History: st.History, LogStart: st.LogStart, HighWatermark: st.HighWatermark}
	_ = listBookmarks(l, func(key string, b owner.Bookmark) error {
		var c consumerSnapshot
		switch {
		case strings.HasPrefix(key, "c/"):
			c.name, c.kind = key[2:], "consumer"
		case strings.HasPrefix(key, "g/"):
			c.name, c.kind = key[2:], "group"
		default:
			return nil
		}
		if lineage == nil {
			lineage = l.Lineage()
		}
		c.committed = b
		c.position = st.LogStart
		if res, err := fence.ResolveBookmark(p, lineage, b.Offset, b.History); err == nil {
			c.position = max(res.Offset, st.LogStart)
		}
		if st.HighWatermark > c.position {
			c.lag = st.HighWatermark - c.position
		}
		out = append(out, c)
		return nil
	})
	return out
}

// readinessChecks are the node's own readiness conditions: its QUIC
// listener accepts connections, and no partition has failed.
func (n *Node) readinessChecks() []Check {
	listener := Check{Name: "listener", OK: true, Detail: "QUIC on " + n.Addr()}
	select {
	case <-n.ln.Draining():
		listener.OK, listener.Detail = false, "the QUIC listener is draining"
	default:
		if n.closing.Load() {
			listener.OK, listener.Detail = false, "the node is shutting down"
		}
	}
	parts := Check{Name: "partitions", OK: true}
	var failed []string
	total := 0
	for _, t := range n.topicList() {
		for i, l := range t.logs {
			total++
			if err := l.State().Failed; err != nil {
				failed = append(failed, fmt.Sprintf("%s/%d failed: %v", t.name, i, err))
			}
		}
	}
	if len(failed) > 0 {
		parts.OK = false
		const show = 5
		if len(failed) > show {
			failed = append(failed[:show], fmt.Sprintf("and %d more", len(failed)-show))
		}
		parts.Detail = strings.Join(failed, "; ")
	} else {
		parts.Detail = fmt.Sprintf("%d partitions serving", total)
	}
	checks := []Check{listener, parts}
	if disk, ok := n.diskCheck(); ok {
		checks = append(checks, disk)
	}
	return checks
}
