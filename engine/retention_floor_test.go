package engine

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// advanceRetention lets d of real time pass in steps the jump-free clock
// counts, enforcing retention (without a floor) at each step, and returns
// the last result.
func advanceRetention(t *testing.T, p *Partition, clock *fakeClock, d, step time.Duration) RetentionResult {
	t.Helper()
	var res RetentionResult
	for left := d; left > 0; left -= step {
		clock.Advance(min(step, left))
		r, err := p.EnforceRetention(clock.Now(), NoRetentionFloor)
		if err != nil {
			t.Fatal(err)
		}
		res.Sealed = res.Sealed || r.Sealed
		res.LogStart, res.Wanted = r.LogStart, r.Wanted
	}
	return res
}

// covers: issue 2 (retention by age reaches a partition that stopped
// receiving appends)
//
// TestRetentionSealsIdleSegment: a partition that stopped receiving
// appends keeps everything in its active segment; once nothing in it was
// appended within RetentionAge, EnforceRetention seals it (fsynced,
// indexed) and deletes it in the same call, under every policy. Appends
// and reads go on at the high watermark afterwards.
func TestRetentionSealsIdleSegment(t *testing.T) {
	for _, d := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		t.Run(d.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			clock := newFakeClock()
			e := mustOpen(t, testOptions(fs, clock))
			defer e.Close()
			top, _ := e.CreateTopic("t", TopicConfig{Durability: d, RetentionAge: time.Hour})
			p, _ := top.Partition(0)
			fillSegments(t, p, 20)
			hw := p.State().HighWatermark
			if res := advanceRetention(t, p, clock, 59*time.Minute, 10*time.Minute); res.Sealed || res.LogStart != 0 {
				t.Fatalf("within the retention age: %+v", res)
			}
			res := advanceRetention(t, p, clock, 2*time.Minute, time.Minute)
			if !res.Sealed || res.LogStart != hw {
				t.Fatalf("an hour after the last append: %+v, want sealed and start %d", res, hw)
			}
			p.mu.Lock()
			n, active := len(p.segs), p.segs[len(p.segs)-1]
			p.mu.Unlock()
			if n != 1 || active.sealed || active.size != 0 {
				t.Fatalf("after retention: %d segments, active sealed %v size %d", n, active.sealed, active.size)
			}
			if got := segmentFiles(t, fs, p.dir); got != 1 {
				t.Fatalf("%d segment files after retention", got)
			}
			// Nothing more to seal: an empty active segment stays.
			if res := advanceRetention(t, p, clock, 2*time.Hour, time.Hour); res.Sealed {
				t.Fatalf("an empty active segment was sealed: %+v", res)
			}
			r := appendWait(t, p, makeBatch(t, "after", 3, 0))
			if r.Base != hw {
				t.Fatalf("append after retention at %d, want %d", r.Base, hw)
			}
			if got, _ := readAll(t, p, hw); len(got) != 3 || got[0].value != "after-0" {
				t.Fatalf("read after retention: %+v", got)
			}
		})
	}
}

// TestSegmentAgeSealsIdleSegment: without retention, an idle active
// segment older than SegmentAge is sealed by EnforceRetention: indexed and
// fsynced when the call returns, so that it and its index survive a
// power loss.
func TestSegmentAgeSealsIdleSegment(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newFakeClock()
	opts := testOptions(fs, clock)
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{Durability: DurabilityNone, SegmentAge: 2 * time.Hour})
	p, _ := top.Partition(0)
	fillSegments(t, p, 10)
	hw := p.State().HighWatermark
	if res := advanceRetention(t, p, clock, time.Hour, time.Hour); res.Sealed {
		t.Fatalf("sealed before the segment age: %+v", res)
	}
	res := advanceRetention(t, p, clock, time.Hour, time.Hour)
	if !res.Sealed || res.LogStart != 0 {
		t.Fatalf("at the segment age: %+v", res)
	}
	p.mu.Lock()
	first := p.segs[0]
	sealed, indexed, n := first.sealed, first.indexed, len(p.segs)
	p.mu.Unlock()
	if !sealed || !indexed || n != 2 {
		t.Fatalf("segment sealed %v indexed %v, %d segments", sealed, indexed, n)
	}
	if _, err := fs.Stat(indexPath(first.path)); err != nil {
		t.Fatalf("index of the sealed segment: %v", err)
	}
	// Policy none: the sealed segment is durable although nothing else
	// was ever fsynced.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = e.Close()
	opts.FS = crashed
	e = mustOpen(t, opts)
	defer e.Close()
	top, _ = e.Topic("t")
	p, _ = top.Partition(0)
	if got, _ := readAll(t, p, 0); len(got) != int(hw) {
		t.Fatalf("after a power loss: %d records, want %d", len(got), hw)
	}
	if _, err := crashed.Stat(indexPath(first.path)); err != nil {
		t.Fatalf("the index did not survive the power loss: %v", err)
	}
}

// TestIdleSealIgnoresClockJumps: clock jumps neither seal an idle segment
// nor expire it.
func TestIdleSealIgnoresClockJumps(t *testing.T) {
	clock := newFakeClock()
	e := mustOpen(t, testOptions(vfs.NewMem(), clock))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{RetentionAge: time.Hour, SegmentAge: time.Hour})
	p, _ := top.Partition(0)
	fillSegments(t, p, 5)
	for _, jump := range []time.Duration{56 * 365 * 24 * time.Hour, -30 * 24 * time.Hour, 100 * 365 * 24 * time.Hour} {
		clock.Advance(jump)
		res, err := p.EnforceRetention(clock.Now(), NoRetentionFloor)
		if err != nil {
			t.Fatal(err)
		}
		if res.Sealed || res.LogStart != 0 {
			t.Fatalf("a clock jump of %v: %+v", jump, res)
		}
	}
}

// covers: issue 11 (retention never deletes records not yet forwarded)
//
// TestRetentionFloor: retention never deletes a segment holding an offset
// at or above the floor, says what the floor held back, and catches up
// when the floor rises or goes away.
func TestRetentionFloor(t *testing.T) {
	fs := vfs.NewMem()
	clock := newFakeClock()
	e := mustOpen(t, testOptions(fs, clock))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024, RetentionBytes: 8192})
	p, _ := top.Partition(0)
	fillSegments(t, p, 200)
	hw := p.State().HighWatermark

	res, err := p.EnforceRetention(clock.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.LogStart != 0 || !res.HeldBack() || res.Wanted == 0 || res.HeldBytes == 0 {
		t.Fatalf("floor 0: %+v", res)
	}
	if p.State().LogStart != 0 {
		t.Fatal("floor 0 deleted data")
	}
	wanted := res.Wanted

	// A floor inside the log: only segments wholly below it go.
	floor := wanted / 2
	res, err = p.EnforceRetention(clock.Now(), floor)
	if err != nil {
		t.Fatal(err)
	}
	if res.LogStart == 0 || res.LogStart > floor || !res.HeldBack() || res.Wanted != wanted {
		t.Fatalf("floor %d: %+v (retention alone: %d)", floor, res, wanted)
	}
	if got, _ := readAll(t, p, res.LogStart); len(got) != int(hw-res.LogStart) || got[0].off != res.LogStart {
		t.Fatalf("floor %d: %d records readable from %d", floor, len(got), res.LogStart)
	}
	if n := p.Stats().RetentionHeld; n != 2 {
		t.Fatalf("RetentionHeld %d, want 2", n)
	}

	// The floor rises past what retention wants: nothing is held back.
	res, err = p.EnforceRetention(clock.Now(), hw)
	if err != nil {
		t.Fatal(err)
	}
	if res.LogStart != wanted || res.HeldBack() || res.HeldBytes != 0 {
		t.Fatalf("floor at the high watermark: %+v, want start %d", res, wanted)
	}
	if n := p.Stats().RetentionHeld; n != 2 {
		t.Fatalf("RetentionHeld %d after a call that held nothing", n)
	}
}

// TestRetentionFloorHoldsIdleSegment: an idle segment sealed by age is
// kept while the floor is below its records, and deleted once the floor
// passes them.
func TestRetentionFloorHoldsIdleSegment(t *testing.T) {
	clock := newFakeClock()
	e := mustOpen(t, testOptions(vfs.NewMem(), clock))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{RetentionAge: time.Hour})
	p, _ := top.Partition(0)
	fillSegments(t, p, 5)
	hw := p.State().HighWatermark
	var res RetentionResult
	for range 3 { // the jump-free clock counts steps of at most an hour
		clock.Advance(30 * time.Minute)
		r, err := p.EnforceRetention(clock.Now(), hw-1)
		if err != nil {
			t.Fatal(err)
		}
		res.LogStart, res.Wanted, res.HeldSegments = r.LogStart, r.Wanted, r.HeldSegments
		res.Sealed = res.Sealed || r.Sealed
	}
	if !res.Sealed || res.LogStart != 0 || res.Wanted != hw || !res.HeldBack() {
		t.Fatalf("floor below the last record: %+v", res)
	}
	res, err := p.EnforceRetention(clock.Now(), hw)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sealed || res.LogStart != hw || res.HeldBack() {
		t.Fatalf("floor at the high watermark: %+v", res)
	}
}
