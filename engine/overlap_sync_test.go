package engine

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ledgemq/ledge/record"
)

// heldSyncs holds every fsync of a segment file while armed: each one
// announces itself on started and returns what release sends. It counts
// the fsyncs of segments attempted after one failed.
type heldSyncs struct {
	armed       atomic.Bool
	failed      atomic.Bool
	afterFailed atomic.Int32
	started     chan struct{}
	release     chan error
}

func newHeldSyncs() *heldSyncs {
	return &heldSyncs{started: make(chan struct{}), release: make(chan error)}
}

func (h *heldSyncs) MaybeError(op errorfs.Op) error {
	if (op.Kind != errorfs.OpFileSyncData && op.Kind != errorfs.OpFileSync) || !isSegment(op.Path) {
		return nil
	}
	if h.failed.Load() {
		h.afterFailed.Add(1)
	}
	if !h.armed.Load() {
		return nil
	}
	h.started <- struct{}{}
	err := <-h.release
	if err != nil {
		h.failed.Store(true)
	}
	return err
}

func (h *heldSyncs) String() string { return "held segment syncs" }

// waitSyncStarted waits for the next held fsync.
func (h *heldSyncs) waitSyncStarted(t *testing.T) {
	t.Helper()
	select {
	case <-h.started:
	case <-time.After(time.Minute):
		t.Fatal("no fsync of a segment started")
	}
}

// overlapBatch is one record of overlapSyncBytes: a round of it hands its
// fsync to the syncer.
func overlapBatch(t *testing.T, tag string) []byte {
	t.Helper()
	var b record.BatchBuilder
	b.Append(record.Record{Value: bytes.Repeat([]byte(tag), overlapSyncBytes/len(tag))})
	batch, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

// waitWritten polls until the partition wrote every offset up to last.
func waitWritten(t *testing.T, p *Partition, last uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		written := p.writtenEnd > last
		p.mu.Unlock()
		if written {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("offset %d was not written while the previous round's fsync ran", last)
		}
		time.Sleep(time.Millisecond)
	}
}

func openHeld(t *testing.T) (*vfs.MemFS, *heldSyncs, Options, *Engine, *Partition) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	h := newHeldSyncs()
	opts := testOptions(errorfs.Wrap(mem, h), newFakeClock())
	e := mustOpen(t, opts)
	top, err := e.CreateTopic("t", TopicConfig{Durability: DurabilityAlways})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	return mem, h, opts, e, p
}

// TestOverlappedRoundWaitsForItsOwnFsync: under always, a big round's
// fsync runs while the next round is written, and that next round is
// acknowledged by an fsync begun after its write, never by the one that
// was running.
func TestOverlappedRoundWaitsForItsOwnFsync(t *testing.T) {
	_, h, _, e, p := openHeld(t)
	defer e.Close()
	ctx := context.Background()
	acked := appendWait(t, p, makeBatch(t, "ok", 3, 0))

	h.armed.Store(true)
	n, err := p.Append(overlapBatch(t, "n"))
	if err != nil {
		t.Fatal(err)
	}
	h.waitSyncStarted(t) // round N's fsync, held
	n1, err := p.Append(overlapBatch(t, "n1"))
	if err != nil {
		t.Fatal(err)
	}
	waitWritten(t, p, n1.Last) // round N+1 written during N's fsync
	if hw := p.State().HighWatermark; hw != acked.Last+1 {
		t.Fatalf("high watermark %d during round N's fsync, want %d", hw, acked.Last+1)
	}
	h.release <- nil
	if err := p.WaitDurable(ctx, n.Last); err != nil {
		t.Fatal(err)
	}
	h.waitSyncStarted(t) // round N+1's own fsync, held
	if hw := p.State().HighWatermark; hw != n.Last+1 {
		t.Fatalf("high watermark %d after round N's fsync, want %d: round N+1 was acknowledged by an fsync begun before its write", hw, n.Last+1)
	}
	h.armed.Store(false)
	h.release <- nil
	if err := p.WaitDurable(ctx, n1.Last); err != nil {
		t.Fatal(err)
	}
	if hw := p.State().HighWatermark; hw != n1.Last+1 {
		t.Fatalf("high watermark %d, want %d", hw, n1.Last+1)
	}
}

// TestOverlappedFsyncFailureAcknowledgesNeitherRound: round N+1 is written
// while round N's fsync runs, and that fsync fails: neither round is
// acknowledged or seen by a reader, the partition fails, no segment is
// fsynced again, and after a power loss the log ends where it was durable.
func TestOverlappedFsyncFailureAcknowledgesNeitherRound(t *testing.T) {
	mem, h, opts, e, p := openHeld(t)
	ctx := context.Background()
	acked := appendWait(t, p, makeBatch(t, "ok", 3, 0))

	h.armed.Store(true)
	n, err := p.Append(overlapBatch(t, "n"))
	if err != nil {
		t.Fatal(err)
	}
	h.waitSyncStarted(t)
	n1, err := p.Append(overlapBatch(t, "n1"))
	if err != nil {
		t.Fatal(err)
	}
	waitWritten(t, p, n1.Last)
	h.release <- errors.New("injected EIO")
	for _, off := range []uint64{n.Last, n1.Last} {
		if err := p.WaitDurable(ctx, off); !errors.Is(err, ErrPartitionFailed) {
			t.Fatalf("wait for offset %d after the failed fsync: %v", off, err)
		}
	}
	st := p.State()
	if st.Failed == nil || st.HighWatermark != acked.Last+1 {
		t.Fatalf("state after the failed fsync: %+v, want failed at high watermark %d", st, acked.Last+1)
	}
	if got, _ := readAll(t, p, 0); len(got) != 3 {
		t.Fatalf("a reader saw %d records, want the 3 acknowledged", len(got))
	}
	if _, err := p.Append(makeBatch(t, "more", 1, 0)); !errors.Is(err, ErrPartitionFailed) {
		t.Fatalf("append after the failed fsync: %v", err)
	}
	_ = e.Close()
	if n := h.afterFailed.Load(); n != 0 {
		t.Fatalf("a segment was fsynced %d times after an fsync failed", n)
	}

	opts.FS = mem.CrashClone(vfs.CrashCloneCfg{})
	e = mustOpen(t, opts)
	defer e.Close()
	top, _ := e.Topic("t")
	p, _ = top.Partition(0)
	if st := p.State(); st.HighWatermark != acked.Last+1 || st.Failed != nil {
		t.Fatalf("after a power loss: %+v, want high watermark %d", st, acked.Last+1)
	}
	if r := appendWait(t, p, makeBatch(t, "again", 1, 0)); r.Base != acked.Last+1 {
		t.Fatalf("the next append took offset %d, want %d", r.Base, acked.Last+1)
	}
}
