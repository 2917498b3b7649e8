package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The tail cache fills only while a consumer reads at the tail. Until
// then, and again once nobody has read there for a while, every batch
// given with AppendOwned is handed back as soon as it is written, so its
// owner can reuse the memory; a batch the cache keeps is never handed back.
func TestTailCacheFillsOnlyWhileReadAtTheTail(t *testing.T) {
	clock := newFakeClock()
	e := mustOpen(t, testOptions(vfs.NewMem(), clock))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{})
	p, _ := top.Partition(0)

	// appendOwned appends a batch and waits until it and everything the
	// flusher did with it is done: a later round's write, waited for,
	// comes after the earlier round's hand-backs.
	appendOwned := func(tag string) (AppendResult, *atomic.Int32) {
		t.Helper()
		var calls atomic.Int32
		r, err := p.AppendOwned(makeBatch(t, tag, 3, 0), func() { calls.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WaitDurable(context.Background(), r.Last); err != nil {
			t.Fatal(err)
		}
		appendWait(t, p, makeBatch(t, tag+"-after", 1, 0))
		return r, &calls
	}
	cachedRead := func(from uint64) bool {
		t.Helper()
		plan, err := p.PlanRead(from, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer plan.Release()
		return plan.x.cached != nil
	}

	// Nobody reads: the batch is handed back once written.
	cold, calls := appendOwned("cold")
	if calls.Load() != 1 {
		t.Fatalf("batch appended with no reader at the tail handed back %d times, want 1", calls.Load())
	}
	if cachedRead(cold.Base) {
		t.Fatal("a batch written with no reader at the tail was served from the cache")
	}

	// A consumer catches up and waits at the high watermark: what is
	// written now is kept for it, and read from memory.
	plan, err := p.PlanRead(p.State().HighWatermark, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	plan.Release()
	warm, calls := appendOwned("warm")
	if calls.Load() != 0 {
		t.Fatal("a batch kept by the tail cache was handed back")
	}
	if !cachedRead(warm.Base) {
		t.Fatal("a batch written while a consumer reads at the tail is not served from the cache")
	}

	// The consumer goes away. Reads served by the cache kept it warm until
	// now; past the warm period nothing more is kept, and the batch the
	// cache held is read from the file, unchanged.
	clock.Advance(tailWarmMillis*time.Millisecond + time.Second)
	later, calls := appendOwned("later")
	if calls.Load() != 1 {
		t.Fatalf("batch appended after the consumer left handed back %d times, want 1", calls.Load())
	}
	if cachedRead(warm.Base) || cachedRead(later.Base) {
		t.Fatal("the cache still serves reads after it went cold")
	}
	got, _ := readAll(t, p, warm.Base)
	if got[0].value != "warm-0" {
		t.Fatalf("first record read back from the file: %+v", got[0])
	}

	// A batch refused is not taken, and not handed back.
	var refused atomic.Int32
	if _, err := p.AppendOwned([]byte("not a batch"), func() { refused.Add(1) }); err == nil {
		t.Fatal("AppendOwned took a malformed batch")
	}
	if refused.Load() != 0 {
		t.Fatal("a refused batch was handed back")
	}
}
