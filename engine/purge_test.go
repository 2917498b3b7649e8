package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// reopen closes e (its file system may have been cloned by a crash
// already) and opens the engine on fs.
func reopen(t *testing.T, e *Engine, opts Options, fs vfs.FS) (*Engine, *Partition) {
	t.Helper()
	_ = e.Close()
	opts.FS = fs
	e = mustOpen(t, opts)
	top, err := e.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	return e, p
}

// durableState reads the partition's state as a restart would.
func durableState(t *testing.T, p *Partition) partState {
	t.Helper()
	st, err := p.loadState()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// segmentsBelow lists the segment files of dir that lie wholly below
// start: those whose successor starts at or below it.
func segmentsBelow(t *testing.T, fs vfs.FS, dir string, start uint64) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []uint64
	for _, n := range names {
		var b uint64
		if _, err := fmt.Sscanf(n, "%020d.log", &b); err == nil && strings.HasSuffix(n, segmentExt) {
			bases = append(bases, b)
		}
	}
	var out []string
	for _, b := range bases {
		for _, c := range bases {
			if c > b && c <= start {
				out = append(out, fmt.Sprintf("%020d.log", b))
				break
			}
		}
	}
	return out
}

// TestPurgeRacingAnAppend: an append lands between the purge's barrier and
// its metadata batch, in the segment that holds the purged records. The
// new start is then inside that segment. After a power loss, recovery
// keeps the acknowledged record after the start (and serves nothing
// below it) instead of taking the segment's first batch for damage.
//
// covers: G23
func TestPurgeRacingAnAppend(t *testing.T) {
	for _, d := range []Durability{DurabilityAlways, DurabilityInterval} {
		t.Run(d.String(), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			opts := testOptions(fs, newFakeClock())
			var racer *Partition
			var raced AppendResult
			opts.BeforePurgeCommit = func(topic string, part int) {
				raced = appendWait(t, racer, makeBatch(t, "fresh", 2, 0))
				if err := racer.syncNow(); err != nil {
					t.Fatal(err)
				}
			}
			e := mustOpen(t, opts)
			top, _ := e.CreateTopic("t", TopicConfig{Durability: d})
			p, _ := top.Partition(0)
			racer = p
			appendWait(t, p, makeBatch(t, "old", 3, 0))
			st, err := p.Purge()
			if err != nil {
				t.Fatal(err)
			}
			if st.LogStart != 3 || raced.Base != 3 {
				t.Fatalf("purge start %d, raced append at %d", st.LogStart, raced.Base)
			}
			// Power loss before the segment holding both sides is sealed.
			e, p = reopen(t, e, opts, fs.CrashClone(vfs.CrashCloneCfg{}))
			defer e.Close()
			st2 := p.State()
			// (Under interval an unclean restart may bump the history: it
			// cannot tell whether offsets reserved but not found were seen.)
			if st2.Failed != nil || st2.LogStart != 3 || st2.History < st.History {
				t.Fatalf("after recovery: %+v", st2)
			}
			got, _ := readAll(t, p, st2.LogStart)
			if len(got) != 2 || got[0].value != "fresh-0" || got[0].off != 3 {
				t.Fatalf("after recovery read %+v", got)
			}
		})
	}
}

// TestFailedSegmentFsyncCutsAtDurableEnd: after an fsync of a segment
// fails, the page cache may hold data the disk never got. A restart
// without a power loss still reads it; recovery must not trust it and
// keeps exactly what the last successful fsync made durable.
//
// covers: G24
func TestFailedSegmentFsyncCutsAtDurableEnd(t *testing.T) {
	for _, d := range []Durability{DurabilityAlways, DurabilityInterval} {
		t.Run(d.String(), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			var fail atomic.Bool
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if fail.Load() && (op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSync) && isSegment(op.Path) {
					return errors.New("injected EIO")
				}
				return nil
			}))
			opts := testOptions(fs, newFakeClock())
			e := mustOpen(t, opts)
			top, _ := e.CreateTopic("t", TopicConfig{Durability: d})
			p, _ := top.Partition(0)
			appendWait(t, p, makeBatch(t, "durable", 3, 0))
			if err := p.syncNow(); err != nil {
				t.Fatal(err)
			}
			fail.Store(true)
			r, err := p.Append(makeBatch(t, "cached", 2, 0))
			if err != nil {
				t.Fatal(err)
			}
			werr := p.WaitDurable(context.Background(), r.Last)
			if d == DurabilityAlways && !errors.Is(werr, ErrPartitionFailed) {
				t.Fatalf("always: append after a failed fsync acknowledged: %v", werr)
			}
			if err := p.syncNow(); !errors.Is(err, ErrPartitionFailed) {
				t.Fatalf("sync after a failed fsync: %v", err)
			}
			fail.Store(false)
			// Restart on the same file system: the "cached" batch is in
			// the file, but it was never durable.
			e, p = reopen(t, e, opts, fs)
			defer e.Close()
			got, _ := readAll(t, p, 0)
			if len(got) != 3 || got[2].value != "durable-2" {
				t.Fatalf("after restart read %+v", got)
			}
			st := p.State()
			if d == DurabilityInterval && st.History != 2 {
				t.Fatalf("interval: an acknowledged record was lost without a new history: %+v", st)
			}
			if d == DurabilityAlways && st.History != 1 {
				t.Fatalf("always: nothing acknowledged was lost, yet the history changed: %+v", st)
			}
			if durableState(t, p).cutAfterCheckpoint {
				t.Fatal("the mark survived the recovery that honoured it")
			}
		})
	}
}

// TestPurgeCleanupIsADurableObligation: the purge's directory fsync fails
// after the segment files are removed. The purge stays acknowledged, the
// cleanup stays pending (never recorded as done), appends go on; a power
// loss brings the removed segments back; recovery removes them again
// before serving, and only then records the cleanup as done.
//
// covers: G22
func TestPurgeCleanupIsADurableObligation(t *testing.T) {
	mem := vfs.NewCrashableMem()
	// Fail the directory fsync that would make a segment removal durable.
	var failDir, removed atomic.Bool
	var partDir atomic.Pointer[string]
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		dir := partDir.Load()
		switch {
		case !failDir.Load() || dir == nil:
		case op.Kind == errorfs.OpRemove && isSegment(op.Path) && strings.HasPrefix(op.Path, *dir):
			removed.Store(true)
		case op.Kind == errorfs.OpFileSync && op.Path == *dir && removed.Load():
			return errors.New("injected EIO")
		}
		return nil
	}))
	opts := testOptions(fs, newFakeClock())
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024})
	p, _ := top.Partition(0)
	fillSegments(t, p, 60)
	dir := p.dir
	partDir.Store(&dir)
	failDir.Store(true)
	st, err := p.Purge()
	if err != nil {
		t.Fatalf("purge with a failing cleanup: %v", err)
	}
	if !st.CleanupPending || st.Failed != nil {
		t.Fatalf("after a failed cleanup: %+v", st)
	}
	if got := segmentsBelow(t, fs, dir, st.LogStart); len(got) != 0 {
		t.Fatalf("segments below the start still listed: %v", got)
	}
	failDir.Store(false)
	fresh := appendWait(t, p, makeBatch(t, "fresh", 2, 0))
	if s := durableState(t, p); !s.cleanupPending() {
		t.Fatal("the cleanup was recorded as done after its directory fsync failed")
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	if got := segmentsBelow(t, crashed, dir, st.LogStart); len(got) == 0 {
		t.Fatal("the power loss brought no removed segment back")
	}
	e, p = reopen(t, e, opts, crashed)
	defer e.Close()
	st2 := p.State()
	if st2.CleanupPending || st2.LogStart != st.LogStart || st2.History != st.History {
		t.Fatalf("after recovery: %+v, before %+v", st2, st)
	}
	if got := segmentsBelow(t, crashed, dir, st2.LogStart); len(got) != 0 {
		t.Fatalf("recovery left segments below the start: %v", got)
	}
	got, _ := readAll(t, p, st2.LogStart)
	if len(got) != 2 || got[0].off != fresh.Base || got[0].value != "fresh-0" {
		t.Fatalf("after recovery read %+v", got)
	}
	// The recovery's record survives a further power loss.
	e, p = reopen(t, e, opts, crashed.CrashClone(vfs.CrashCloneCfg{}))
	defer e.Close()
	if s := durableState(t, p); s.cleanupPending() {
		t.Fatalf("recovery did not record the cleanup: %+v", s)
	}
}

// TestCleanupRecordedOnlyAfterDirectorySync: a purge whose cleanup
// succeeds records it, and a power loss right after finds no segment below
// the start.
//
// covers: G22
func TestCleanupRecordedOnlyAfterDirectorySync(t *testing.T) {
	for _, d := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		t.Run(d.String(), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			opts := testOptions(fs, newFakeClock())
			e := mustOpen(t, opts)
			defer func() { _ = e.Close() }()
			top, _ := e.CreateTopic("t", TopicConfig{Durability: d, SegmentBytes: 4096, MaxBatchBytes: 1024})
			p, _ := top.Partition(0)
			fillSegments(t, p, 60)
			st, err := p.Purge()
			if err != nil {
				t.Fatal(err)
			}
			if st.CleanupPending {
				t.Fatalf("cleanup still pending after a purge without failures: %+v", st)
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{})
			if got := segmentsBelow(t, crashed, p.dir, st.LogStart); len(got) != 0 {
				t.Fatalf("recorded as done, yet a power loss brings back %v", got)
			}
		})
	}
}

// TestDeletedTopicRefusesMetadata: once a topic is deleted, writes of its
// bookmarks and spaces fail instead of leaving keys no topic owns.
//
// covers: G26
func TestDeletedTopicRefusesMetadata(t *testing.T) {
	e := mustOpen(t, testOptions(vfs.NewMem(), newFakeClock()))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{})
	p, _ := top.Partition(0)
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SetBookmark("c", Bookmark{Offset: 1, History: 1}); !errors.Is(err, ErrTopicDeleted) {
		t.Fatalf("bookmark of a deleted topic: %v", err)
	}
	if _, err := e.PutMeta(p.Space("s"), []byte("k"), []byte("v")); !errors.Is(err, ErrTopicDeleted) {
		t.Fatalf("space of a deleted topic: %v", err)
	}
	if _, _, err := p.Bookmark("c"); !errors.Is(err, ErrTopicDeleted) {
		t.Fatalf("bookmark read of a deleted topic: %v", err)
	}
	if st := p.State(); !errors.Is(st.Failed, ErrTopicDeleted) {
		t.Fatalf("state of a deleted partition: %+v", st)
	}
}

// TestRestartAfterNumberingGap: an unclean restart under interval or none
// continues numbering at the reservation ceiling, leaving a gap after the
// log's last record. A
// checkpoint written before anything is appended (a clean close, here)
// must record where the log's data ends, not where numbering resumes;
// otherwise the next recovery takes the gap for lost durable data and
// refuses the partition.
//
// covers: G27
func TestRestartAfterNumberingGap(t *testing.T) {
	for _, d := range []Durability{DurabilityInterval, DurabilityNone} {
		t.Run(d.String(), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			opts := testOptions(fs, newFakeClock())
			e := mustOpen(t, opts)
			top, _ := e.CreateTopic("t", TopicConfig{Durability: d})
			p, _ := top.Partition(0)
			appendWait(t, p, makeBatch(t, "a", 3, 0))
			if err := p.syncNow(); err != nil {
				t.Fatal(err)
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{})
			e, p = reopen(t, e, opts, crashed)
			gap := p.State().HighWatermark
			if gap <= 3 {
				t.Fatalf("no numbering gap after an unclean restart: %+v", p.State())
			}
			// Clean close with nothing appended, then open again.
			e, p = reopen(t, e, opts, crashed)
			defer e.Close()
			if st := p.State(); st.Failed != nil || st.HighWatermark != gap {
				t.Fatalf("after a clean restart: %+v", st)
			}
			if got, _ := readAll(t, p, 0); len(got) != 3 {
				t.Fatalf("read %+v", got)
			}
			if r := appendWait(t, p, makeBatch(t, "b", 1, 0)); r.Base < gap {
				t.Fatalf("offset %d reused below %d", r.Base, gap)
			}
		})
	}
}

// TestNoSecondBumpForTheSameGap: after an unclean restart resumed
// numbering above a gap, another unclean restart with nothing appended
// in between lost nothing and keeps the history.
func TestNoSecondBumpForTheSameGap(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs, newFakeClock())
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{Durability: DurabilityNone})
	p, _ := top.Partition(0)
	appendWait(t, p, makeBatch(t, "a", 3, 0))
	if err := p.syncNow(); err != nil {
		t.Fatal(err)
	}
	appendWait(t, p, makeBatch(t, "lost", 2, 0)) // not synced: lost
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	e, p = reopen(t, e, opts, crashed)
	first := p.State()
	if first.History != 2 {
		t.Fatalf("a visible record was lost without a new history: %+v", first)
	}
	crashed = crashed.CrashClone(vfs.CrashCloneCfg{})
	e, p = reopen(t, e, opts, crashed)
	defer e.Close()
	if st := p.State(); st.History != first.History || st.HighWatermark != first.HighWatermark {
		t.Fatalf("a restart that lost nothing changed the history: %+v, before %+v", st, first)
	}
}

// TestPaddingIsNotATornTail: a segment file can hold zeros after its last
// record (a recovery cut a torn tail there, and appends went on). Once the
// segment is sealed and followed by another, those zeros are padding, not
// a torn tail: a recovery must keep the later segments and their
// acknowledged records.
func TestPaddingIsNotATornTail(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs, newFakeClock())
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{Durability: DurabilityAlways, SegmentBytes: 4096, MaxBatchBytes: 1024})
	p, _ := top.Partition(0)
	appendWait(t, p, makeBatch(t, "a", 2, 0))
	path := p.segmentPath(0, segmentExt)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Garbage after the last record, as a torn write leaves it; the next
	// recovery zeroes it.
	f, _ := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	st, _ := f.Stat()
	_, _ = f.WriteAt(make([]byte, 6000), st.Size())
	_, _ = f.WriteAt([]byte("torn"), st.Size()+10)
	_ = f.Sync()
	_ = f.Close()
	e = mustOpen(t, opts)
	top, _ = e.Topic("t")
	p, _ = top.Partition(0)
	// Appends fill the segment (over part of the zeros) and roll to the
	// next one.
	segments := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.segs)
	}
	var last AppendResult
	for segments() < 2 {
		last = appendWait(t, p, makeBatch(t, "b", 4, 0))
	}
	last = appendWait(t, p, makeBatch(t, "c", 4, 0))
	// A power loss before the partition's state recorded the new
	// checkpoint: the first segment is not known to be durable.
	e, p = reopen(t, e, opts, fs.CrashClone(vfs.CrashCloneCfg{}))
	defer e.Close()
	got, _ := readAll(t, p, 0)
	if len(got) == 0 || got[len(got)-1].off != last.Last {
		t.Fatalf("after recovery the log ends at %+v, want offset %d", got[len(got)-1], last.Last)
	}
}
