package engine

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Under DurabilityNone a sealed segment is fsynced at most
// noneSealSyncDelay after its seal, or at once when
// noneSealSyncMaxSegments wait: a power loss within the delay may take the
// sealed segments (the policy acknowledges from the page cache), one after
// it may not, and a long burst never leaves more than the bound unsynced.
func TestNoneDefersTheFsyncOfSealedSegments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := newFakeClock()
		fs := vfs.NewCrashableMem()
		e := mustOpen(t, testOptions(fs, clock))
		defer e.Close()
		top, err := e.CreateTopic("t", TopicConfig{Durability: DurabilityNone, SegmentBytes: 4096, MaxBatchBytes: 2048})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := top.Partition(0)
		appendUntilSealed := func(tag string, segs int) uint64 {
			t.Helper()
			var last uint64
			for i := 0; p.sealedAwaitingSync() < segs; i++ {
				last = appendWait(t, p, makeBatch(t, fmt.Sprintf("%s%d", tag, i), 20, clock.Now().UnixMilli())).Last
				synctest.Wait()
			}
			return last
		}
		// kept reopens a copy of the files as a power loss right now would
		// leave them (nothing unsynced survives) and returns the end of the
		// records it kept.
		kept := func() uint64 {
			t.Helper()
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			e2 := mustOpen(t, testOptions(crashed, clock))
			defer e2.Close()
			top2, err := e2.Topic("t")
			if err != nil {
				t.Fatal(err)
			}
			p2, _ := top2.Partition(0)
			recs, _ := readAll(t, p2, 0)
			if len(recs) == 0 {
				return 0
			}
			return recs[len(recs)-1].off + 1
		}

		last := appendUntilSealed("a", 3)
		if end := kept(); end > last {
			t.Fatalf("a power loss right after the seals kept records up to %d of %d: the sealed segments were fsynced at once", end, last+1)
		}
		time.Sleep(noneSealSyncDelay - time.Second)
		synctest.Wait()
		if n := p.sealedAwaitingSync(); n != 3 {
			t.Fatalf("%d sealed segments wait for an fsync %v after their seal, want 3", n, noneSealSyncDelay-time.Second)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := p.sealedAwaitingSync(); n != 0 {
			t.Fatalf("%d sealed segments still wait for an fsync %v after their seal", n, noneSealSyncDelay)
		}
		if end := kept(); end < last+1 {
			t.Fatalf("a power loss %v after the seals kept records only up to %d of %d", noneSealSyncDelay, end, last+1)
		}
		// A burst longer than the bound: the seal that makes the bound's
		// worth of segments wait fsyncs them without waiting for the timer.
		segments := func() int {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.segs)
		}
		before, from := p.State().HighWatermark, segments()
		for i := 0; segments() < from+noneSealSyncMaxSegments+2; i++ {
			appendWait(t, p, makeBatch(t, fmt.Sprintf("b%d", i), 20, clock.Now().UnixMilli()))
			synctest.Wait()
			if n := p.sealedAwaitingSync(); n >= noneSealSyncMaxSegments {
				t.Fatalf("%d sealed segments wait for an fsync, more than the bound %d", n, noneSealSyncMaxSegments)
			}
		}
		if end := kept(); end <= before {
			t.Fatalf("after a burst of more than %d segments a power loss kept nothing of it", noneSealSyncMaxSegments)
		}
	})
}

// Retention by size does not wait for the deferred fsyncs: a burst under
// none that takes the partition past RetentionBytes is cut back to it by
// the next EnforceRetention, which makes the segments it deletes durable
// (and indexed) first.
func TestRetentionDoesNotWaitForDeferredFsyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := newFakeClock()
		e := mustOpen(t, testOptions(vfs.NewCrashableMem(), clock))
		defer e.Close()
		top, err := e.CreateTopic("t", TopicConfig{Durability: DurabilityNone, SegmentBytes: 4096, MaxBatchBytes: 2048, RetentionBytes: 3 * 4096})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := top.Partition(0)
		for i := 0; p.sealedAwaitingSync() < 10; i++ {
			appendWait(t, p, makeBatch(t, fmt.Sprintf("r%d", i), 20, clock.Now().UnixMilli()))
			synctest.Wait()
		}
		res, err := p.EnforceRetention(clock.Now(), NoRetentionFloor)
		if err != nil {
			t.Fatal(err)
		}
		if res.LogStart == 0 {
			t.Fatal("retention deleted nothing while the sealed segments waited for their deferred fsync")
		}
		// What is left is what retention keeps: without its oldest
		// segment the partition would hold less than RetentionBytes.
		p.mu.Lock()
		var total int64
		for _, s := range p.segs {
			total += s.size
		}
		oldest := p.segs[0].size
		p.mu.Unlock()
		if total-oldest >= 3*4096 {
			t.Fatalf("%d bytes kept in %d-byte segments: retention stopped short of its %d", total, 4096, 3*4096)
		}
	})
}
