package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/fence"
)

func fillSegments(t *testing.T, p *Partition, batches int) {
	t.Helper()
	for i := 0; i < batches; i++ {
		appendWait(t, p, makeBatch(t, "r", 4, int64(i)))
	}
}

func segmentFiles(t *testing.T, fs vfs.FS, dir string) int {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		if strings.HasSuffix(name, segmentExt) {
			n++
		}
	}
	return n
}

func TestRetentionBySize(t *testing.T) {
	fs := vfs.NewMem()
	e := mustOpen(t, testOptions(fs, newFakeClock()))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024, RetentionBytes: 8192})
	p, _ := top.Partition(0)
	fillSegments(t, p, 200)
	before := segmentFiles(t, fs, p.dir)
	if _, err := p.EnforceRetention(time.Now(), NoRetentionFloor); err != nil {
		t.Fatal(err)
	}
	st := p.State()
	after := segmentFiles(t, fs, p.dir)
	if st.LogStart == 0 || after >= before || st.History != 1 {
		t.Fatalf("retention: start %d, segments %d → %d, epoch %d", st.LogStart, before, after, st.History)
	}
	var total int64
	p.mu.Lock()
	for _, s := range p.segs {
		total += s.size
	}
	first := p.segs[0].base
	p.mu.Unlock()
	if total < 8192 || total > 8192+4096 {
		t.Fatalf("%d bytes kept for a retention of 8192", total)
	}
	if first > st.LogStart {
		t.Fatalf("start %d is below the first segment %d", st.LogStart, first)
	}
	_, err := p.PlanRead(0, 100)
	var oor *OutOfRangeError
	if !errors.As(err, &oor) || oor.Start != st.LogStart {
		t.Fatalf("read below the start: %v", err)
	}
	got, _ := readAll(t, p, st.LogStart)
	if len(got) == 0 || got[0].off != st.LogStart {
		t.Fatalf("reading from the start gave %d records", len(got))
	}
}

// TestRetentionByAgeIgnoresClockJumps: a node booting with its clock in
// 1970, then corrected by NTP (and later set far ahead by mistake), never
// deletes data early; real elapsed time does delete it.
func TestRetentionByAgeIgnoresClockJumps(t *testing.T) {
	fs := vfs.NewMem()
	clock := newFakeClock()
	clock.Set(time.Unix(10, 0)) // booted in 1970
	opts := testOptions(fs, clock)
	e := mustOpen(t, opts)
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024, RetentionAge: 24 * time.Hour})
	p, _ := top.Partition(0)
	fillSegments(t, p, 100)
	// NTP corrects the clock by 56 years, then it jumps a century ahead.
	for _, jump := range []time.Time{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2126, 1, 1, 0, 0, 0, 0, time.UTC)} {
		clock.Set(jump)
		if _, err := p.EnforceRetention(clock.Now(), NoRetentionFloor); err != nil {
			t.Fatal(err)
		}
		if st := p.State(); st.LogStart != 0 {
			t.Fatalf("a clock jump to %v deleted data: start %d", jump, st.LogStart)
		}
	}
	// And back: a backward jump is no time either.
	clock.Set(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	if _, err := p.EnforceRetention(clock.Now(), NoRetentionFloor); err != nil {
		t.Fatal(err)
	}
	// A day of real time, observed in steps, does expire sealed segments.
	for i := 0; i < 25; i++ {
		clock.Advance(time.Hour)
		if _, err := p.EnforceRetention(clock.Now(), NoRetentionFloor); err != nil {
			t.Fatal(err)
		}
	}
	st := p.State()
	if st.LogStart == 0 {
		t.Fatal("a day of elapsed time did not expire anything")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.segs) != 1 || p.segs[0].sealed {
		t.Fatalf("retention must keep exactly the active segment, have %d segments", len(p.segs))
	}
}

func TestPurge(t *testing.T) {
	fs := vfs.NewMem()
	clock := newFakeClock()
	opts := testOptions(fs, clock)
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024})
	p, _ := top.Partition(0)
	fillSegments(t, p, 100)
	hw := p.State().HighWatermark
	pid := fence.ProducerID(7)
	b := makeBatch(t, "prod", 2, 0)
	setProducer(b, 7, 1, 0)
	appendWait(t, p, b)
	hw += 2
	seq, err := p.SetBookmark("c1", Bookmark{Offset: 50, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SyncMeta(context.Background(), seq); err != nil {
		t.Fatal(err)
	}
	st, err := p.Purge()
	if err != nil {
		t.Fatal(err)
	}
	if st.LogStart != hw || st.HighWatermark != hw || st.History != 2 {
		t.Fatalf("after purge: %+v, want start = hw = %d, epoch 2", st, hw)
	}
	if tr := st.Lineage[len(st.Lineage)-1]; tr.Kind != fence.TransitionPurge || tr.Start != hw || tr.Epoch != 2 {
		t.Fatalf("purge transition %+v", tr)
	}
	_, err = p.PlanRead(0, 100)
	var oor *OutOfRangeError
	if !errors.As(err, &oor) || oor.Start != hw {
		t.Fatalf("read below the purge: %v", err)
	}
	// Offsets continue; producer state survives purge.
	r := appendWait(t, p, makeBatch(t, "new", 3, 0))
	if r.Base != hw {
		t.Fatalf("first offset after purge %d, want %d", r.Base, hw)
	}
	if ps, ok := p.ProducerState(pid); !ok || ps.Len() != 1 {
		t.Fatalf("producer state after purge: %+v %v", ps, ok)
	}
	if n := segmentFiles(t, fs, p.dir); n > 2 {
		t.Fatalf("%d segment files after purge", n)
	}
	// The bookmark is kept with its epoch; the owner resolves it.
	if bm, ok, _ := p.Bookmark("c1"); !ok || bm.History != 1 {
		t.Fatalf("bookmark %+v %v", bm, ok)
	}
	// Everything survives a restart, and a crash.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, opts)
	defer e.Close()
	top, _ = e.Topic("t")
	p, _ = top.Partition(0)
	st2 := p.State()
	if st2.LogStart != hw || st2.History != 2 || st2.HighWatermark != hw+3 {
		t.Fatalf("after restart: %+v", st2)
	}
	if ps, ok := p.ProducerState(pid); !ok || ps.Len() != 1 || ps.Batch(0).Base != hw-2 {
		t.Fatalf("producer state after restart: %+v %v", ps, ok)
	}
	got, _ := readAll(t, p, hw)
	if len(got) != 3 || got[0].value != "new-0" {
		t.Fatalf("after restart read %+v", got)
	}
}

// TestPurgeCrashBringsBackSegments: segments deleted by a purge whose
// directory sync did not survive come back after a power loss; they are
// never served and are removed again.
func TestPurgeCrashBringsBackSegments(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newFakeClock()
	opts := testOptions(fs, clock)
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024})
	p, _ := top.Partition(0)
	fillSegments(t, p, 100)
	dir := p.dir
	// Keep the segment files as they were before the purge: a power loss
	// after an unsynced deletion brings them back.
	old := map[string][]byte{}
	names, _ := fs.List(dir)
	for _, n := range names {
		b, err := readWholeFile(fs, fs.PathJoin(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		old[n] = b
	}
	st, err := p.Purge()
	if err != nil {
		t.Fatal(err)
	}
	appendWait(t, p, makeBatch(t, "fresh", 2, 0))
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = e.Close()
	back := 0
	for n, b := range old {
		path := crashed.PathJoin(dir, n)
		if _, err := crashed.Stat(path); err == nil {
			continue
		}
		f, err := crashed.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write(b)
		_ = f.Sync()
		_ = f.Close()
		back++
	}
	if back == 0 {
		t.Fatal("the purge deleted no segment")
	}
	opts.FS = crashed
	e = mustOpen(t, opts)
	defer e.Close()
	top, _ = e.Topic("t")
	p, _ = top.Partition(0)
	st2 := p.State()
	if st2.LogStart != st.LogStart || st2.History != 2 {
		t.Fatalf("after the crash: %+v, before %+v", st2, st)
	}
	got, _ := readAll(t, p, st2.LogStart)
	for _, r := range got {
		if !strings.HasPrefix(r.value, "fresh") {
			t.Fatalf("a purged record came back: %+v", r)
		}
	}
	if n := segmentFiles(t, crashed, dir); n > 2 {
		t.Fatalf("%d segment files after recovery", n)
	}
}

// covers: G26
func TestDeleteAndRecreateTopic(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newFakeClock()
	opts := testOptions(fs, clock)
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{})
	oldID := top.ID()
	p, _ := top.Partition(0)
	appendWait(t, p, makeBatch(t, "old", 5, 0))
	if _, err := e.PutMeta(p.Space("sessions"), []byte("k"), []byte("old")); err != nil {
		t.Fatal(err)
	}
	seq, _ := p.SetBookmark("c", Bookmark{Offset: 3, History: 1})
	_ = e.SyncMeta(context.Background(), seq)
	pending, _ := p.Append(makeBatch(t, "pending", 1, 0))
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitDurable(context.Background(), pending.Last); err != nil && !errors.Is(err, ErrTopicDeleted) {
		t.Fatalf("pending append after delete: %v", err)
	}
	if _, err := p.Append(makeBatch(t, "late", 1, 0)); !errors.Is(err, ErrTopicDeleted) {
		t.Fatalf("append to a deleted topic: %v", err)
	}
	if _, err := e.Topic("t"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("deleted topic still there: %v", err)
	}
	top2, err := e.CreateTopic("t", TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if top2.ID() == oldID {
		t.Fatal("re-created topic has the old id")
	}
	p2, _ := top2.Partition(0)
	check := func(p2 *Partition, e *Engine) {
		t.Helper()
		if st := p2.State(); st.HighWatermark != 0 || st.History != 1 {
			t.Fatalf("re-created partition %+v", st)
		}
		if _, ok, _ := p2.Bookmark("c"); ok {
			t.Fatal("old bookmark visible in the re-created topic")
		}
		if _, ok, _ := e.GetMeta(p2.Space("sessions"), []byte("k")); ok {
			t.Fatal("old metadata visible in the re-created topic")
		}
	}
	check(p2, e)
	// After a power loss the old topic's files are gone for good.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = e.Close()
	opts.FS = crashed
	e = mustOpen(t, opts)
	defer e.Close()
	top2, _ = e.Topic("t")
	p2, _ = top2.Partition(0)
	check(p2, e)
	names, _ := crashed.List(crashed.PathJoin("data", topicsDirName))
	if len(names) != 1 || names[0] != top2.ID().String() {
		t.Fatalf("topic directories after recovery: %v", names)
	}
}
