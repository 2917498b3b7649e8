package node

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/transport/wire"
)

// What the status page and the scrape-time collectors read from a node.
// It is read-only: nothing here changes a log or a consumer's progress,
// and the owners' locks are never taken.

// Snapshot reads the node's state to the given depth, for the HTTP
// endpoints (ops.Source).
func (n *Node) Snapshot(depth ops.Depth) ops.Snapshot {
	s := ops.Snapshot{
		Listen:    n.Addr(),
		DataDir:   n.cfg.DataDir,
		Transport: n.Stats(),
		Parked:    len(n.parked),
		MaxParked: cap(n.parked),
	}
	if depth == ops.Everything {
		if u, err := n.cfg.FS.GetDiskUsage(n.cfg.DataDir); err == nil {
			s.DiskFree, s.DiskTotal = u.AvailBytes, u.TotalBytes
		}
	}
	for _, t := range n.topicList() {
		ts := ops.TopicSnapshot{Name: t.Name, ID: t.ID, Config: t.Config}
		for i, l := range t.Logs {
			ps := ops.PartitionSnapshot{Index: uint32(i), State: l.State(), Size: -1}
			ps.Stats, ps.HasStats = logStats(l)
			if o, err := t.Owner(uint32(i)); err == nil {
				ps.KeyPolls = o.KeyPolls()
			}
			if depth == ops.Everything {
				ps.Size = n.partitionSize(t.ID, i)
				ps.Consumers = consumersOf(l, ps.State)
			}
			ts.Parts = append(ts.Parts, ps)
		}
		s.Topics = append(s.Topics, ts)
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
func consumersOf(l owner.PartitionLog, st owner.LogState) []ops.ConsumerSnapshot {
	var out []ops.ConsumerSnapshot
	var lineage []fence.HistoryTransition
	p := fence.Partition{History: st.History, LogStart: st.LogStart, HighWatermark: st.HighWatermark}
	_ = listBookmarks(l, func(key string, b owner.Bookmark) error {
		var c ops.ConsumerSnapshot
		switch {
		case strings.HasPrefix(key, "c/"):
			c.Name, c.Kind = key[2:], "consumer"
		case strings.HasPrefix(key, "g/"):
			c.Name, c.Kind = key[2:], "group"
		default:
			return nil
		}
		if lineage == nil {
			lineage = l.Lineage()
		}
		c.Committed = b
		c.Position = st.LogStart
		if res, err := fence.ResolveBookmark(p, lineage, b.Offset, b.History); err == nil {
			c.Position = max(res.Offset, st.LogStart)
		}
		if st.HighWatermark > c.Position {
			c.Lag = st.HighWatermark - c.Position - skippedIn(l, c.Position, st.HighWatermark)
		}
		out = append(out, c)
		return nil
	})
	return out
}

// skippedIn counts the offsets of [from, to) that hold no record because
// a recovery skipped them: they are not lag.
func skippedIn(l owner.PartitionLog, from, to uint64) uint64 {
	if el, ok := l.(owner.EngineLog); ok {
		return el.Partition().Skipped(from, to)
	}
	return 0
}

// ReadinessChecks are the node's own readiness conditions: its QUIC
// listener accepts connections, and no partition has failed.
func (n *Node) ReadinessChecks() []ops.Check {
	listener := ops.Check{Name: "listener", OK: true, Detail: "QUIC on " + n.Addr()}
	select {
	case <-n.ln.Draining():
		listener.OK, listener.Detail = false, "the QUIC listener is draining"
	default:
		if n.closing.Load() {
			listener.OK, listener.Detail = false, "the node is shutting down"
		}
	}
	parts := ops.Check{Name: "partitions", OK: true}
	var failed []string
	total := 0
	for _, t := range n.topicList() {
		for i, l := range t.Logs {
			total++
			if err := l.State().Failed; err != nil {
				failed = append(failed, fmt.Sprintf("%s/%d failed: %v", t.Name, i, err))
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
	checks := []ops.Check{listener, parts}
	if disk, ok := n.diskCheck(); ok {
		checks = append(checks, disk)
	}
	return checks
}

// Metrics receives what the node counts while it serves: the events that
// cannot be read back from its state later. Everything that can (offsets,
// epochs, committed offsets, lag, appends, connections) is read from the
// node and its storage when metrics are scraped, not pushed here.
//
// Implementations must be safe for concurrent use and must not block: the
// calls are made on the request path. PromMetrics is the implementation
// behind /metrics; a nil Metrics counts nothing.
type Metrics interface {
	// RequestDone is called once per request answered, with the status of
	// its reply and the time from the start of its handling to its reply
	// being ready (for a long poll, the wait included).
	RequestDone(kind wire.Kind, status wire.Status, d time.Duration)
	// Delivered is called when a poll returned record batches from a
	// partition, with their size.
	Delivered(topic string, partition uint32, bytes int)
	// FenceRejected is called for every piece of work refused by a fence
	// check: a request's own status, or one partition's status within a
	// poll, commit or reset reply.
	FenceRejected(kind wire.Kind, code fence.Code)
}

// observeRequest reports one answered request to m (when not nil) and
// logs its fence rejections at debug level. req is the decoded request;
// rep is its reply, meaningful when err is nil. It is the one call the
// request path makes for metrics.
func observeRequest(log *slog.Logger, m Metrics, kind wire.Kind, start time.Time, req, rep wire.Message, err error) {
	status, msg := StatusOf(err)
	if m != nil {
		m.RequestDone(kind, status, time.Since(start))
	}
	fenced := func(s wire.Status, msg string) {
		if !s.IsFence() {
			return
		}
		code := fence.Code(s - wire.FenceStatusBase)
		if m != nil {
			m.FenceRejected(kind, code)
		}
		if log != nil {
			log.Debug("fence rejection", "request", kind.String(), "code", code.String(), "reason", msg)
		}
	}
	if err != nil {
		fenced(status, msg)
		return
	}
	switch r := rep.(type) {
	case *wire.PollReply:
		q, ok := req.(*wire.PollRequest)
		if !ok || q == nil || r == nil {
			return
		}
		for i := range r.Partitions {
			p := &r.Partitions[i]
			fenced(p.Status, p.Message)
			if i >= len(q.Partitions) || m == nil {
				continue
			}
			n := len(p.Batches)
			for _, b := range p.BatchParts {
				n += len(b)
			}
			if n > 0 {
				m.Delivered(q.Partitions[i].Topic, q.Partitions[i].Partition, n)
			}
		}
	case *wire.CommitReply:
		if r != nil {
			for _, p := range r.Partitions {
				fenced(p.Status, p.Message)
			}
		}
	case *wire.ResetPositionReply:
		if r != nil {
			for _, p := range r.Partitions {
				fenced(p.Status, p.Message)
			}
		}
	case *wire.GetCommittedReply:
		if r != nil {
			for _, p := range r.Partitions {
				fenced(p.Status, p.Message)
			}
		}
	}
}

// authed is what a connection authenticated with: its token, and what its
// client announced it reads (the Authenticate flags).
type authed struct {
	tok   *tokens.Token
	flags wire.AuthFlags
}

// admit takes a place of the node's shedder for produce request r, or
// answers it busy: nothing happened (session/busy.go; docs/OPERATIONS.md,
// "Overload").
func (n *Node) admit(sess *session.Session, r *request) bool {
	busy := n.shed.Admit(len(r.raw))
	if busy == nil {
		r.admitted = true
		return true
	}
	observeRequest(n.log, n.cfg.Metrics, r.frame.Kind, time.Now(), nil, nil, busy)
	r.Undefer()
	r.out.frame = sess.BusyReply(r.frame.FrameHeader, busy)
	return false
}

// releaseAdmission gives back r's place of the node's shedder, if it
// holds one.
func (r *request) releaseAdmission() {
	if r.admitted {
		r.n.shed.Release(len(r.raw))
	}
}

// TransformStatuses lists the node's transforms for the status page
// (ops.TransformLister).
func (n *Node) TransformStatuses() []ops.TransformStatus {
	if n.transforms == nil {
		return nil
	}
	var out []ops.TransformStatus
	for _, info := range n.transforms.List() {
		s := info.Spec
		ts := ops.TransformStatus{Name: s.Name, Plugin: s.Plugin, From: s.From, To: s.To, State: info.State(),
			Error: info.Error, Partitions: []ops.TransformPartitionStatus{}}
		for _, p := range info.Partitions {
			ts.Lag, ts.RecordsIn, ts.RecordsOut = ts.Lag+p.Lag, ts.RecordsIn+p.RecordsIn, ts.RecordsOut+p.RecordsOut
			ts.PluginFailures += p.PluginFailures
			ts.Partitions = append(ts.Partitions, ops.TransformPartitionStatus{Partition: p.Partition, Committed: p.Committed,
				HighWatermark: p.HighWatermark, Lag: p.Lag, RecordsIn: p.RecordsIn, RecordsOut: p.RecordsOut,
				PluginFailures: p.PluginFailures, LastError: p.LastError})
		}
		out = append(out, ts)
	}
	return out
}
