package sim

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// FaultKind names a failure the simulator injects through errorfs. A fault
// is armed at a step boundary and fails the first matching call after it
// (one shot); which call that is follows from the schedule alone, because
// the engine makes a partition's calls in its own order and the simulator
// lets everything go idle between steps.
type FaultKind uint8

const (
	// FaultSegmentSync fails an fsync of a segment file.
	FaultSegmentSync FaultKind = iota + 1
	// FaultIndexSync fails the fsync of an index file being written.
	FaultIndexSync
	// FaultPartitionDirSync fails an fsync of a partition directory.
	FaultPartitionDirSync
	// FaultCleanupDirSync fails the fsync of a partition directory that
	// would make a segment removal durable (a purge's or retention's
	// cleanup).
	FaultCleanupDirSync
	// FaultTopicsDirSync fails an fsync of the directory holding the
	// topics' directories (topic creation, deletion cleanup).
	FaultTopicsDirSync
	// FaultWALSync fails an fsync of the metadata store's write-ahead log.
	FaultWALSync
	// FaultSegmentRead fails a read of a segment file: a poll's, through
	// the engine's read path (its header peek included).
	FaultSegmentRead
)

var faultNames = map[FaultKind]string{
	FaultSegmentSync:      "segment-sync",
	FaultIndexSync:        "index-sync",
	FaultPartitionDirSync: "partition-dir-sync",
	FaultCleanupDirSync:   "cleanup-dir-sync",
	FaultTopicsDirSync:    "topics-dir-sync",
	FaultWALSync:          "wal-sync",
	FaultSegmentRead:      "segment-read",
}

func (k FaultKind) String() string {
	if n, ok := faultNames[k]; ok {
		return n
	}
	return fmt.Sprintf("fault(%d)", uint8(k))
}

// ParseFault maps a fault's name to its kind.
func ParseFault(s string) (FaultKind, error) {
	for k, n := range faultNames {
		if n == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("sim: unknown fault %q", s)
}

// Fault is an armed failure: its kind, and for a file fsync whether the
// failure also drops the file's unsynced data (Linux after a writeback
// error: the pages are marked clean, so a later fsync reports success and
// writes nothing, and a power loss returns what was last on disk, even if
// reads in between still see the new bytes).
type Fault struct {
	Kind FaultKind
	Drop bool
}

func (f Fault) String() string {
	if f.Drop {
		return f.Kind.String() + "+drop"
	}
	return f.Kind.String()
}

// errInjected is what an injected failure returns.
var errInjected = errors.New("sim: injected I/O error")

var (
	partitionDirRE = regexp.MustCompile(`/topics/[0-9a-f]{32}/[0-9]+$`)
	topicsDirRE    = regexp.MustCompile(`(^|/)topics$`)
)

func isSyncOp(k errorfs.OpKind) bool {
	return k == errorfs.OpFileSync || k == errorfs.OpFileSyncData || k == errorfs.OpFileSyncTo
}

// isSegmentPath reports whether path is a segment file (pebble's WAL files
// end in .log too).
func isSegmentPath(path string) bool {
	return strings.Contains(path, "/topics/") && strings.HasSuffix(path, ".log")
}

// isEnginePath reports whether path is a file of the log (a segment or an
// index, not the metadata store's).
func isEnginePath(path string) bool { return strings.Contains(path, "/topics/") }

// injector is the errorfs.Injector of a Disk: it fails the call an armed
// fault matches, once.
type injector struct {
	mu    sync.Mutex
	armed *Fault
	// removed: partition directories where a segment was removed since the
	// fault was armed (for FaultCleanupDirSync).
	removed map[string]bool
	fired   []string // what failed, for the trace
	drop    bool     // whether the last injected failure drops data
	// walFailed: the metadata WAL failed since the process started.
	walFailed bool
}

// lastDrop reports whether the last injected failure drops the file's
// unsynced data.
func (in *injector) lastDrop() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.drop
}

func (in *injector) String() string { return "sim injector" }

func (in *injector) arm(f Fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.armed = &f
	in.removed = map[string]bool{}
}

func (in *injector) disarm() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.armed = nil
}

// takeFired returns the failures injected since the last call.
func (in *injector) takeFired() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	f := in.fired
	in.fired = nil
	return f
}

// isArmed reports whether a fault waits for its call.
func (in *injector) isArmed() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.armed != nil
}

// MaybeError implements errorfs.Injector.
func (in *injector) MaybeError(op errorfs.Op) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	f := in.armed
	if f == nil {
		return nil
	}
	if op.Kind == errorfs.OpRemove && isSegmentPath(op.Path) {
		in.removed[op.Path[:strings.LastIndexByte(op.Path, '/')]] = true
	}
	kindOK := isSyncOp(op.Kind)
	if f.Kind == FaultSegmentRead {
		kindOK = op.Kind == errorfs.OpFileReadAt
	}
	if !kindOK || !matches(f.Kind, op.Path, in.removed) {
		return nil
	}
	in.armed = nil
	in.drop = f.Drop
	if f.Kind == FaultWALSync {
		in.walFailed = true
	}
	in.fired = append(in.fired, fmt.Sprintf("%s failed %s", f, shortPath(op.Path)))
	return errInjected
}

func matches(k FaultKind, path string, removed map[string]bool) bool {
	switch k {
	case FaultSegmentSync:
		return isSegmentPath(path)
	case FaultIndexSync:
		return isEnginePath(path) && strings.HasSuffix(path, ".tmp")
	case FaultPartitionDirSync:
		return partitionDirRE.MatchString(path)
	case FaultCleanupDirSync:
		return partitionDirRE.MatchString(path) && removed[path]
	case FaultTopicsDirSync:
		return topicsDirRE.MatchString(path)
	case FaultWALSync:
		return strings.Contains(path, "/meta/") && strings.HasSuffix(path, ".log")
	case FaultSegmentRead:
		return isSegmentPath(path)
	}
	return false
}

var (
	topicIDRE = regexp.MustCompile(`[0-9a-f]{32}`)
	walRE     = regexp.MustCompile(`/meta/[0-9]+\.log$`)
)

// shortPath abbreviates the topic ids in path and names the metadata WAL
// without its number.
func shortPath(path string) string {
	path = walRE.ReplaceAllString(path, "/meta/WAL")
	return topicIDRE.ReplaceAllStringFunc(path, func(id string) string { return id[:8] })
}
