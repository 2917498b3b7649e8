package engine

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/fence"
)

var engineSeeds = flag.Int("engine.seeds", 8, "seeds per durability policy for the randomized engine tests")

// crashModel remembers what the test appended and what it may expect.
type crashModel struct {
	values   map[uint64]string // every offset handed out → its record's value
	acked    map[uint64]bool   // acknowledged per the policy
	maxOut   uint64            // exclusive end of every offset handed out
	visible  uint64            // a high watermark observed before the crash
	startMin uint64
}

func newCrashModel() *crashModel {
	return &crashModel{values: make(map[uint64]string), acked: make(map[uint64]bool)}
}

// TestCrashRecovery appends, crashes with a random share of unsynced data
// surviving, reopens, and checks: under always every acknowledged record
// is there; under every policy no torn or foreign record is visible, no
// offset is handed out twice, and a recovery that lost a record a reader
// could have seen bumped the history epoch.
//
// covers: G27
func TestCrashRecovery(t *testing.T) {
	for _, d := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		for seed := 0; seed < *engineSeeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", d, seed), func(t *testing.T) {
				runCrashSeed(t, d, uint64(seed))
			})
		}
	}
}

func runCrashSeed(t *testing.T, d Durability, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(d)))
	clock := newFakeClock()
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs, clock)
	opts.ReservationStep = uint64(20 + rng.IntN(200))
	e := mustOpen(t, opts)
	top, err := e.CreateTopic("t", TopicConfig{Durability: d, SegmentBytes: 4096, MaxBatchBytes: 2048, SyncInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	name := top.Name()
	m := newCrashModel()
	ctx := context.Background()
	for cycle := 0; cycle < 4; cycle++ {
		top, err := e.Topic(name)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := top.Partition(0)
		before := p.State()
		// Nothing handed out before may be handed out again.
		for i := 0; i < 10+rng.IntN(60); i++ {
			n := 1 + rng.IntN(6)
			tag := fmt.Sprintf("c%d-i%d", cycle, i)
			r, err := p.Append(makeBatch(t, tag, n, clock.Now().UnixMilli()))
			if err != nil {
				t.Fatalf("append: %v", err)
			}
			if r.Base < m.maxOut {
				t.Fatalf("offset %d handed out again (everything below %d was handed out before)", r.Base, m.maxOut)
			}
			for j := 0; j < n; j++ {
				m.values[r.Base+uint64(j)] = fmt.Sprintf("%s-%d", tag, j)
			}
			m.maxOut = r.Last + 1
			if rng.IntN(3) == 0 {
				if err := p.WaitDurable(ctx, r.Last); err != nil {
					t.Fatalf("wait durable: %v", err)
				}
				// Only always promises that an acknowledged record survives.
				for o := before.LogStart; d == DurabilityAlways && o <= r.Last; o++ {
					if _, ok := m.values[o]; ok && o >= m.startMin {
						m.acked[o] = true
					}
				}
			}
			if rng.IntN(40) == 0 {
				st, err := p.Purge()
				if err != nil {
					t.Fatalf("purge: %v", err)
				}
				m.startMin = st.LogStart
				for o := range m.acked {
					if o < st.LogStart {
						delete(m.acked, o)
					}
				}
			}
		}
		m.visible = p.State().HighWatermark
		preEpoch := p.State().History
		clean := rng.IntN(4) == 0
		var next *vfs.MemFS
		if clean {
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			next = fs
		} else {
			next = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
			_ = e.Close()
		}
		fs = next
		opts.FS = fs
		e = mustOpen(t, opts)
		top, err = e.Topic(name)
		if err != nil {
			t.Fatal(err)
		}
		p, _ = top.Partition(0)
		st := p.State()
		if st.Failed != nil {
			t.Fatalf("cycle %d: partition failed after recovery: %v", cycle, st.Failed)
		}
		got, _ := readAll(t, p, st.LogStart)
		seen := make(map[uint64]bool, len(got))
		for _, r := range got {
			want, ok := m.values[r.off]
			if !ok || want != r.value {
				t.Fatalf("cycle %d: offset %d holds %q, appended %q", cycle, r.off, r.value, want)
			}
			seen[r.off] = true
		}
		for o := range m.acked {
			if o >= st.LogStart && !seen[o] {
				t.Fatalf("cycle %d (%s): acknowledged offset %d lost", cycle, d, o)
			}
		}
		lost := uint64(1<<64 - 1)
		for o := range m.values {
			if o >= st.LogStart && o < m.visible && !seen[o] {
				lost = min(lost, o)
			}
		}
		if clean && (st.History != preEpoch || lost != 1<<64-1) {
			t.Fatalf("clean restart changed the history (%d → %d) or lost offset %d", preEpoch, st.History, lost)
		}
		if lost != 1<<64-1 {
			if d == DurabilityAlways {
				t.Fatalf("always: visible offset %d lost", lost)
			}
			tr := st.Lineage[len(st.Lineage)-1]
			if st.History <= preEpoch || tr.Kind != fence.TransitionLossyRecovery || tr.KeptEnd > lost {
				t.Fatalf("cycle %d: offset %d lost but history %d → %d, last transition %+v", cycle, lost, preEpoch, st.History, tr)
			}
		}
		if st.History != preEpoch && testing.Verbose() {
			t.Logf("cycle %d: epoch %d → %d lineage %+v lost %d", cycle, preEpoch, st.History, st.Lineage[len(st.Lineage)-1], lost)
		}
		if d == DurabilityAlways && st.History != preEpoch {
			t.Fatalf("always: recovery bumped the history epoch %d → %d", preEpoch, st.History)
		}
		end := st.LogStart // the recovered log's end
		for o := range seen {
			end = max(end, o+1)
		}
		if !clean && d == DurabilityAlways && st.HighWatermark != end {
			t.Fatalf("cycle %d: always: numbering resumes at %d, not at the log's end %d", cycle, st.HighWatermark, end)
		}
		// What lies between the log's end and where numbering resumes is
		// skipped: it counts as no record.
		if skipped := st.Skipped(end, st.HighWatermark); skipped != st.HighWatermark-end {
			t.Fatalf("cycle %d: %d of the offsets [%d, %d) recorded as skipped (gaps %v)", cycle, skipped, end, st.HighWatermark, st.Gaps)
		}
		if d == DurabilityAlways && len(st.Gaps) != 0 {
			t.Fatalf("cycle %d: always: offsets skipped: %v", cycle, st.Gaps)
		}
		// Forget what did not survive: it may not come back either.
		for o := range m.values {
			if !seen[o] {
				delete(m.values, o)
				delete(m.acked, o)
			}
		}
		if d == DurabilityAlways {
			// What was handed out and neither acknowledged nor seen by
			// a reader may be handed out again: it does not exist.
			m.maxOut = st.HighWatermark
		}
		m.startMin = st.LogStart
	}
	_ = e.Close()
}

// TestCrashRecoveryConcurrent: several appenders on two partitions, some
// waiting for durability and some not, then a power loss while the
// pipelines are still writing and syncing.
func TestCrashRecoveryConcurrent(t *testing.T) {
	for _, d := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		for seed := 0; seed < *engineSeeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", d, seed), func(t *testing.T) {
				runConcurrentCrash(t, d, uint64(seed))
			})
		}
	}
}

func runConcurrentCrash(t *testing.T, d Durability, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7+uint64(d)))
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs, newFakeClock())
	opts.ReservationStep = 64
	e := mustOpen(t, opts)
	top, err := e.CreateTopic("t", TopicConfig{Partitions: 2, Durability: d, SegmentBytes: 4096, MaxBatchBytes: 2048, SyncInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	values := map[[2]uint64]string{} // (partition, offset) → value
	acked := map[[2]uint64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wseed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(wseed, 1))
			for i := 0; i < 40; i++ {
				part := r.IntN(2)
				p, _ := top.Partition(part)
				n := 1 + r.IntN(4)
				tag := fmt.Sprintf("w%d-%d", wseed%1000, i)
				res, err := p.Append(makeBatch(t, tag, n, 0))
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				for j := 0; j < n; j++ {
					values[[2]uint64{uint64(part), res.Base + uint64(j)}] = fmt.Sprintf("%s-%d", tag, j)
				}
				mu.Unlock()
				if r.IntN(2) == 0 {
					if err := p.WaitDurable(context.Background(), res.Last); err != nil {
						t.Errorf("wait: %v", err)
						return
					}
					if d == DurabilityAlways {
						mu.Lock()
						for j := 0; j < n; j++ {
							acked[[2]uint64{uint64(part), res.Base + uint64(j)}] = true
						}
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
	_ = e.Close()
	opts.FS = crashed
	e = mustOpen(t, opts)
	defer e.Close()
	top, _ = e.Topic("t")
	for part := 0; part < 2; part++ {
		p, _ := top.Partition(part)
		st := p.State()
		if st.Failed != nil {
			t.Fatalf("partition %d failed: %v", part, st.Failed)
		}
		got, _ := readAll(t, p, st.LogStart)
		seen := map[uint64]bool{}
		for _, r := range got {
			if want := values[[2]uint64{uint64(part), r.off}]; want != r.value {
				t.Fatalf("partition %d offset %d holds %q, appended %q", part, r.off, r.value, want)
			}
			seen[r.off] = true
		}
		var maxOut uint64
		for k := range values {
			if k[0] == uint64(part) {
				// Under always, what was neither acknowledged nor seen
				// by a reader (what did not survive) may be handed out
				// again.
				if d != DurabilityAlways || seen[k[1]] {
					maxOut = max(maxOut, k[1]+1)
				}
				if acked[k] && !seen[k[1]] {
					t.Fatalf("partition %d: acknowledged offset %d lost", part, k[1])
				}
			}
		}
		r := appendWait(t, p, makeBatch(t, "after", 1, 0))
		if r.Base < maxOut {
			t.Fatalf("partition %d: offset %d handed out again", part, r.Base)
		}
		if d == DurabilityAlways && r.Base != maxOut {
			t.Fatalf("partition %d: always: numbering resumed at %d, not at the log's end %d", part, r.Base, maxOut)
		}
	}
}
