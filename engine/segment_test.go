package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestSegmentRollBySizeAndAge(t *testing.T) {
	clock := newFakeClock()
	fs := vfs.NewMem()
	e := mustOpen(t, testOptions(fs, clock))
	defer e.Close()
	top, err := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024, SegmentAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	for i := 0; i < 100; i++ {
		appendWait(t, p, makeBatch(t, "size", 4, 0))
	}
	names, _ := fs.List(p.dir)
	logs := 0
	for _, n := range names {
		if strings.HasSuffix(n, segmentExt) {
			logs++
		}
	}
	p.mu.Lock()
	nsegs := len(p.segs)
	for _, s := range p.segs[:nsegs-1] {
		if s.size > 4096 || !s.sealed {
			t.Errorf("sealed segment %d: %d bytes, sealed=%v", s.base, s.size, s.sealed)
		}
	}
	p.mu.Unlock()
	if nsegs < 3 || logs != nsegs {
		t.Fatalf("%d segments in memory, %d files", nsegs, logs)
	}
	// Age: the next append after an hour on the (jump-free) clock rolls.
	clock.Advance(30 * time.Minute)
	appendWait(t, p, makeBatch(t, "a", 1, 0))
	clock.Advance(31 * time.Minute)
	r := appendWait(t, p, makeBatch(t, "b", 1, 0))
	p.mu.Lock()
	active := p.segs[len(p.segs)-1]
	p.mu.Unlock()
	if active.base != r.Base {
		t.Fatalf("segment did not roll by age: active segment starts at %d, last append at %d", active.base, r.Base)
	}
	// Segment names are their base offsets.
	if want := fmt.Sprintf("%020d.log", r.Base); !strings.HasSuffix(active.path, want) {
		t.Fatalf("active segment file %s, want %s", active.path, want)
	}
}

func TestIndexLookupByOffset(t *testing.T) {
	clock := newFakeClock()
	fs := vfs.NewMem()
	opts := testOptions(fs, clock)
	opts.IndexIntervalBytes = 256
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 8192, MaxBatchBytes: 1024})
	p, _ := top.Partition(0)
	for i := 0; i < 200; i++ {
		appendWait(t, p, makeBatch(t, fmt.Sprint("v", i), 2, int64(i)))
	}
	check := func() {
		t.Helper()
		p.DropTailCache()
		for _, off := range []uint64{0, 1, 2, 77, 150, 151, 398, 399} {
			res := execRead(t, p, off, 1)
			if len(res.Batches) != 1 {
				t.Fatalf("read at %d returned %d batches, want 1", off, len(res.Batches))
			}
			got, _ := readAll(t, p, off)
			if got[0].off != off || got[0].value != fmt.Sprintf("v%d-%d", off/2, off%2) {
				t.Fatalf("read at %d starts with %+v", off, got[0])
			}
		}
		p.mu.Lock()
		for _, s := range p.segs {
			if s.size > 1024 && len(s.offs) < 2 {
				t.Errorf("segment %d of %d bytes has %d index entries", s.base, s.size, len(s.offs))
			}
		}
		p.mu.Unlock()
	}
	check()
	// Indexes survive a clean restart, and are rebuilt when missing.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List(p.dir)
	for _, n := range names {
		if strings.HasSuffix(n, indexExt) {
			_ = fs.Remove(fs.PathJoin(p.dir, n))
			break
		}
	}
	e = mustOpen(t, opts)
	defer e.Close()
	top, _ = e.Topic("t")
	p, _ = top.Partition(0)
	check()
}

func TestTimeIndexWithJumpingProducerClock(t *testing.T) {
	clock := newFakeClock()
	opts := testOptions(vfs.NewMem(), clock)
	opts.IndexIntervalBytes = 128
	e := mustOpen(t, opts)
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024})
	p, _ := top.Partition(0)
	// A producer clock at 1970, corrected, then jumping back and forward.
	stamps := []int64{5, 10, 20, 1_700_000_000_000, 1_700_000_001_000, 300, 1_700_000_002_000,
		4_000_000_000_000, 1_700_000_003_000, 1_700_000_004_000}
	for round := 0; round < 20; round++ {
		for _, ts := range stamps {
			appendWait(t, p, makeBatch(t, "x", 1, ts+int64(round)))
		}
	}
	ctx := context.Background()
	p.DropTailCache()
	// The running maximum first reaches 1_700_000_000_000 at the 4th batch.
	cases := []struct {
		ts   int64
		want uint64
	}{
		{0, 0}, {6, 1}, {21, 3}, {1_700_000_000_000, 3}, {1_700_000_001_500, 6},
		{3_000_000_000_000, 7}, {4_000_000_000_000, 7}, {4_000_000_000_001, 17},
		{5_000_000_000_000, p.State().HighWatermark},
	}
	for _, c := range cases {
		got, err := p.OffsetForTime(ctx, c.ts)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("OffsetForTime(%d) = %d, want %d", c.ts, got, c.want)
		}
	}
	// The time index is monotone.
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := int64(minTS)
	for _, s := range p.segs {
		for _, te := range s.times {
			if te.ts < prev {
				t.Fatalf("time index goes back: %d after %d", te.ts, prev)
			}
			prev = te.ts
		}
	}
}

func TestAppendTimeTopicStampsTimestamps(t *testing.T) {
	clock := newFakeClock()
	e := mustOpen(t, testOptions(vfs.NewMem(), clock))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{Timestamps: TimestampAppend})
	p, _ := top.Partition(0)
	appendWait(t, p, makeBatch(t, "x", 3, 5))
	got, _ := readAll(t, p, 0)
	for _, r := range got {
		if r.ts != clock.Now().UnixMilli() {
			t.Fatalf("record %d has timestamp %d, want the append time %d", r.off, r.ts, clock.Now().UnixMilli())
		}
	}
}
