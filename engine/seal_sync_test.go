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
