package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/internal/fullfs"
)

// A full disk is an expected state: the tests here run the engine on a
// disk of limited size (fullfs), fill it, and check that appends are
// refused with the retryable ErrNoSpace while everything else goes on,
// and that appends resume by themselves once space is freed.

// disk is an engine on a 64 MiB disk with a 1 MiB ballast, and its topic
// "t" of small segments.
type disk struct {
	fs    *fullfs.FS
	clock *fakeClock
	opts  Options
	e     *Engine
	p     *Partition
}

func fullDisk(t *testing.T, dur Durability) *disk {
	return fullDiskTopic(t, TopicConfig{Durability: dur})
}

func fullDiskTopic(t *testing.T, cfg TopicConfig) *disk {
	t.Helper()
	d := &disk{fs: fullfs.Wrap(vfs.NewMem(), "", 64<<20), clock: newFakeClock()}
	d.opts = testOptions(d.fs, d.clock)
	d.opts.ReservedBytes = 1 << 20
	d.e = mustOpen(t, d.opts)
	cfg.SegmentBytes, cfg.MaxBatchBytes = 256<<10, 64<<10
	top, err := d.e.CreateTopic("t", cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.p, _ = top.Partition(0)
	return d
}

// reopen closes the engine (cleanly) and opens it again on the same disk.
func (d *disk) reopen(t *testing.T) {
	t.Helper()
	_ = d.e.Close()
	d.e = mustOpen(t, d.opts)
	top, err := d.e.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	d.p, _ = top.Partition(0)
}

// appendUntilFull appends batches of n records until one is refused for
// lack of space, and returns the appends acknowledged.
func appendUntilFull(t *testing.T, p *Partition, n int) []AppendResult {
	t.Helper()
	var acked []AppendResult
	for i := 0; ; i++ {
		r, err := p.Append(makeBatch(t, "fill", n, int64(i)))
		if err == nil {
			err = p.WaitDurable(context.Background(), r.Last)
		}
		if err == nil {
			acked = append(acked, r)
			continue
		}
		if !errors.Is(err, ErrNoSpace) || !Retryable(err) {
			t.Fatalf("append %d on a filling disk: %v (want ErrNoSpace)", i, err)
		}
		if len(acked) == 0 {
			t.Fatal("nothing fitted on the disk")
		}
		return acked
	}
}

func mustBeServing(t *testing.T, p *Partition) PartitionState {
	t.Helper()
	st := p.State()
	if st.Failed != nil {
		t.Fatalf("the partition failed on a full disk: %v", st.Failed)
	}
	return st
}

// TestPurgeOnAFullDisk: the documented remedy for a full disk works on a
// full disk. The append that found the disk full wrote what fitted past
// the log's end; the purge seals that segment (zeroing only bytes the
// file holds, which takes no room), writes its metadata in the room the
// ballast gave up, removes every purged segment, and the partition takes
// appends again.
func TestPurgeOnAFullDisk(t *testing.T) {
	for _, dur := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		t.Run(dur.String(), func(t *testing.T) {
			d := fullDisk(t, dur)
			defer d.e.Close()
			d.fs.Fill(3 << 20)
			acked := appendUntilFull(t, d.p, 1000)
			st := mustBeServing(t, d.p)
			if !d.e.Space().Full || d.e.Space().Reserved {
				t.Fatalf("space after filling the disk: %+v", d.e.Space())
			}
			full := d.fs.Used()

			after, err := d.p.Purge()
			if err != nil {
				t.Fatalf("purge on a full disk: %v", err)
			}
			if after.Failed != nil || after.LogStart < st.HighWatermark || after.LogStart <= acked[len(acked)-1].Last {
				t.Fatalf("after the purge: %+v (high watermark was %d)", after, st.HighWatermark)
			}
			if left := segmentsBelow(t, d.fs, d.p.dir, after.LogStart); len(left) > 0 {
				t.Fatalf("purged segments left on the disk: %v", left)
			}
			if used := d.fs.Used(); used > full-(1<<20) {
				t.Fatalf("the purge freed too little: %d bytes used, %d before", used, full)
			}
			if sp := d.e.Space(); sp.Full || !sp.Reserved {
				t.Fatalf("space after the purge: %+v", sp)
			}
			r := appendWait(t, d.p, makeBatch(t, "after", 3, 0))
			if r.Base < after.LogStart {
				t.Fatalf("offset %d reused below the purge's start %d", r.Base, after.LogStart)
			}
			got, _ := readAll(t, d.p, after.LogStart)
			if len(got) != 3 || got[0].value != "after-0" {
				t.Fatalf("after the purge: %+v", got)
			}
		})
	}
}

// TestRollOnAFullDisk: a segment fills on a full disk. The roll seals it
// (its index finds no room: the segment goes without one), the batch that
// wanted the new segment is refused, appends resume once space is freed,
// and the log is intact after a restart, which reads the sealed segments
// by scanning them.
func TestRollOnAFullDisk(t *testing.T) {
	d := fullDisk(t, DurabilityAlways)
	d.fs.Fill(3 << 20)
	acked := appendUntilFull(t, d.p, 1000)
	mustBeServing(t, d.p)
	want, _ := readAll(t, d.p, 0)
	if uint64(len(want)) != acked[len(acked)-1].Last+1 {
		t.Fatalf("read %d records, acknowledged up to %d", len(want), acked[len(acked)-1].Last)
	}
	if _, err := d.p.Append(makeBatch(t, "refused", 2, 0)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append on a full disk: %v", err)
	}

	d.fs.SetBudget(64 << 20) // an operator frees space
	d.clock.Advance(spaceProbeInterval)
	r := appendWait(t, d.p, makeBatch(t, "resumed", 2, 0))
	if r.Base <= acked[len(acked)-1].Last {
		t.Fatalf("offset %d reused", r.Base)
	}
	d.reopen(t)
	defer d.e.Close()
	got, _ := readAll(t, d.p, 0)
	if len(got) != len(want)+2 {
		t.Fatalf("after a restart: %d records, want %d", len(got), len(want)+2)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestRetentionOnAFullDisk: retention deletes segments on a full disk,
// and the room it freed takes appends again.
func TestRetentionOnAFullDisk(t *testing.T) {
	d := fullDiskTopic(t, TopicConfig{RetentionBytes: 512 << 10})
	defer d.e.Close()
	d.fs.Fill(3 << 20)
	appendUntilFull(t, d.p, 1000)
	mustBeServing(t, d.p)
	full := d.fs.Used()
	res, err := d.p.EnforceRetention(d.opts.Now(), NoRetentionFloor)
	if err != nil {
		t.Fatalf("retention on a full disk: %v", err)
	}
	if res.LogStart == 0 || d.fs.Used() >= full {
		t.Fatalf("retention freed nothing: %+v, %d bytes used (%d before)", res, d.fs.Used(), full)
	}
	mustBeServing(t, d.p)
	appendWait(t, d.p, makeBatch(t, "after", 3, 0))
}

// TestSealOnAFullDisk: the active segment, due to be sealed by age, is
// sealed on a full disk that nothing frees, whose ballast's room went to
// another program but for a few KiB the metadata store writes: what the
// refused write left past the log's end is zeroed in place, which takes
// no room, and the index that finds none is left out.
func TestSealOnAFullDisk(t *testing.T) {
	d := fullDiskTopic(t, TopicConfig{SegmentAge: time.Hour})
	defer d.e.Close()
	d.fs.Fill(3 << 20)
	appendUntilFull(t, d.p, 3000)
	d.fs.Fill(1 << 10)
	var res RetentionResult
	for i := 0; i < 3 && !res.Sealed; i++ {
		d.clock.Advance(30 * time.Minute)
		var err error
		if res, err = d.p.EnforceRetention(d.opts.Now(), NoRetentionFloor); err != nil {
			t.Fatalf("retention on a full disk: %v", err)
		}
	}
	if !res.Sealed {
		t.Fatal("the segment due by age was not sealed on a full disk")
	}
	want, _ := readAll(t, d.p, 0)
	d.fs.SetBudget(64 << 20)
	d.reopen(t)
	defer d.e.Close()
	if got, _ := readAll(t, d.p, 0); len(got) != len(want) {
		t.Fatalf("after a restart: %d records, want %d", len(got), len(want))
	}
}

// TestDeleteOnAFullDisk: deleting a topic on a full disk works and gives
// its room back to appends at once.
func TestDeleteOnAFullDisk(t *testing.T) {
	d := fullDisk(t, DurabilityAlways)
	defer d.e.Close()
	other, err := d.e.CreateTopic("other", TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	d.fs.Fill(3 << 20)
	appendUntilFull(t, d.p, 1000)
	full := d.fs.Used()
	if err := d.e.DeleteTopic("t"); err != nil {
		t.Fatalf("delete on a full disk: %v", err)
	}
	if used := d.fs.Used(); used > full-(1<<20) {
		t.Fatalf("the deletion freed too little: %d bytes used, %d before", used, full)
	}
	op, _ := other.Partition(0)
	appendWait(t, op, makeBatch(t, "after", 3, 0))
}
