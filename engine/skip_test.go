package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestAlwaysSkipsNoOffsetAfterPowerLoss: under always, a power loss skips
// no offset, however often it comes: readers saw only fsynced records,
// all of which survive, so numbering continues at the log's end, the
// history epoch stays, and no gap is recorded. Appends in flight at the
// loss (not waited for) survive or not; the log stays dense either way.
//
// covers: G27
func TestAlwaysSkipsNoOffsetAfterPowerLoss(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs, newFakeClock())
	opts.ReservationStep = 64
	e := mustOpen(t, opts)
	top, err := e.CreateTopic("t", TopicConfig{Durability: DurabilityAlways})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	for round := range 3 {
		for i := range 5 {
			appendWait(t, p, makeBatch(t, fmt.Sprintf("r%d.%d", round, i), 1, 0))
		}
		if _, err := p.Append(makeBatch(t, fmt.Sprintf("r%d.inflight", round), 2, 0)); err != nil {
			t.Fatal(err)
		}
		fs = fs.CrashClone(vfs.CrashCloneCfg{})
		_ = e.Close()
		opts.FS = fs
		e = mustOpen(t, opts)
		top, _ = e.Topic("t")
		p, _ = top.Partition(0)
		st := p.State()
		got, _ := readAll(t, p, 0)
		for i, r := range got {
			if r.off != uint64(i) {
				t.Fatalf("round %d: record %d of the log at offset %d: offsets skipped", round, i, r.off)
			}
		}
		if st.HighWatermark != uint64(len(got)) || st.History != 1 || len(st.Gaps) != 0 {
			t.Fatalf("round %d: %d records, state %+v: want the high watermark at the log's end, history 1, no gap", round, len(got), st)
		}
	}
	defer e.Close()
	got, _ := readAll(t, p, 0)
	r := appendWait(t, p, makeBatch(t, "next", 1, 0))
	if r.Base != uint64(len(got)) {
		t.Fatalf("the next record took offset %d after %d records", r.Base, len(got))
	}
}

// TestAlwaysSixteenthRecordAfterThreePowerLosses is the story on
// the engine: five records acknowledged before each of three power
// losses, then one more: it is the sixteenth, at offset 15.
func TestAlwaysSixteenthRecordAfterThreePowerLosses(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs, newFakeClock())
	opts.ReservationStep = 0 // the default: 2^20
	e := mustOpen(t, opts)
	if _, err := e.CreateTopic("t", TopicConfig{Durability: DurabilityAlways}); err != nil {
		t.Fatal(err)
	}
	for round := range 4 {
		top, _ := e.Topic("t")
		p, _ := top.Partition(0)
		n := 5
		if round == 3 {
			n = 1
		}
		var last AppendResult
		for i := range n {
			last = appendWait(t, p, makeBatch(t, fmt.Sprintf("r%d.%d", round, i), 1, 0))
		}
		if round == 3 {
			if last.Base != 15 {
				t.Fatalf("the 16th record has offset %d, want 15", last.Base)
			}
			break
		}
		fs = fs.CrashClone(vfs.CrashCloneCfg{})
		_ = e.Close()
		opts.FS = fs
		e = mustOpen(t, opts)
	}
	_ = e.Close()
}

// TestSkipAfterCrashIsAboutASecondOfAppends: under interval and none a
// crash skips what was reserved and not used, and a reservation covers
// about a second of appends at the partition's rate: at 10,000 records a
// second (10 a batch, a batch a millisecond on the injected clock) the
// skip is at most about 10,000 offsets, not 2^20. The skipped range is
// recorded, survives a clean restart, and counts as no record between a
// consumer at the log's end and the high watermark.
//
// covers: G27
func TestSkipAfterCrashIsAboutASecondOfAppends(t *testing.T) {
	for _, d := range []Durability{DurabilityInterval, DurabilityNone} {
		t.Run(d.String(), func(t *testing.T) {
			clock := newFakeClock()
			fs := vfs.NewCrashableMem()
			opts := testOptions(fs, clock)
			opts.ReservationStep = 0 // the default: 2^20
			e := mustOpen(t, opts)
			top, err := e.CreateTopic("t", TopicConfig{Durability: d, SyncInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := top.Partition(0)
			const perBatch, batches = 10, 2500
			for i := range batches {
				appendWait(t, p, makeBatch(t, fmt.Sprintf("b%d", i), perBatch, 0))
				clock.Advance(time.Millisecond)
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 2))})
			e, p = reopen(t, e, opts, crashed)
			st := p.State()
			got, _ := readAll(t, p, 0)
			end := uint64(0)
			if len(got) > 0 {
				end = got[len(got)-1].off + 1
			}
			skip := st.HighWatermark - end
			t.Logf("%s: %d records kept, numbering resumes at %d: %d offsets skipped, gaps %v", d, len(got), st.HighWatermark, skip, st.Gaps)
			if bound := uint64(perBatch*1000) * 11 / 10; skip > bound {
				t.Fatalf("%d offsets skipped, more than about a second of appends (%d)", skip, bound)
			}
			if st.Skipped(end, st.HighWatermark) != skip {
				t.Fatalf("skipped [%d, %d) but gaps %v", end, st.HighWatermark, st.Gaps)
			}
			// A clean restart keeps the record of the gap.
			e, p = reopen(t, e, opts, crashed)
			defer e.Close()
			if st2 := p.State(); st2.HighWatermark != st.HighWatermark || st2.Skipped(end, st2.HighWatermark) != skip {
				t.Fatalf("after a clean restart: %+v, want the high watermark %d and %d skipped", st2, st.HighWatermark, skip)
			}
		})
	}
}

// TestReservationFollowsTheAppendRate: a reservation covers about
// ReservationTime of appends at the rate since the previous one, within
// its floor and ceiling, and one that ran out is followed by one at least
// twice as large.
func TestReservationFollowsTheAppendRate(t *testing.T) {
	o, err := Options{FS: vfs.NewMem(), Dir: "d"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		used    uint64
		elapsed time.Duration
		ranOut  bool
		want    uint64
	}{
		{"a slow partition gets the floor", 10, time.Second, false, DefaultMinReservation},
		{"a second of appends", 50_000, 500 * time.Millisecond, false, 100_000},
		{"a burst is capped", 1 << 30, time.Second, false, DefaultReservationStep},
		{"a clock that went back counts a millisecond", 100, -time.Hour, false, 100_000},
		{"ran out: at least twice the last", 10, time.Second, true, 2 * 4096},
	}
	for _, c := range cases {
		r := reservation{step: 4096, at: t0, from: 1000}
		if got := r.next(o, t0.Add(c.elapsed), 1000+c.used, c.ranOut); got != c.want {
			t.Errorf("%s: step %d, want %d", c.name, got, c.want)
		}
	}
	var first reservation
	if got := first.next(o, t0, 0, false); got != DefaultMinReservation {
		t.Errorf("first reservation: %d, want the floor %d", got, DefaultMinReservation)
	}
}
