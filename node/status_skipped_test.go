package node

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/node/owner"
)

// TestLagLeavesOutOffsetsACrashSkipped: a crash of a "none" topic resumes
// numbering above what was reserved; a consumer that committed the log's
// end has no lag after it, though the high watermark moved past its
// position, and the partition's records are the records it holds.
func TestLagLeavesOutOffsetsACrashSkipped(t *testing.T) {
	opts := engine.Options{Dir: "data", ReservedBytes: -1}
	opts.FS = crashAboveReservation(context.Background(), t, opts, "c/billing")
	e, err := engine.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	top, _ := e.Topic("t")
	p, _ := top.Partition(0)
	l := owner.NewEngineLog(p)
	st := l.State()
	if st.HighWatermark <= 3 {
		t.Fatalf("high watermark %d: the crash skipped nothing, the test shows nothing", st.HighWatermark)
	}
	got := consumersOf(l, st)
	if len(got) != 1 || got[0].Position != 3 || got[0].Lag != 0 {
		t.Fatalf("consumers %+v: want billing at 3 with no lag (high watermark %d)", got, st.HighWatermark)
	}
	if s := p.Stats(); s.SkippedOffsets != st.HighWatermark-3 {
		t.Fatalf("%d offsets recorded as skipped, want %d", s.SkippedOffsets, st.HighWatermark-3)
	}
}

// crashAboveReservation opens an engine on a crashable opts.FS, appends
// three records to partition 0 of a "none" topic t, sets bookmark key at
// offset 3 and syncs it, and returns the file system as a crash leaves it:
// an engine opened on it resumes t's numbering above its reservation.
func crashAboveReservation(ctx context.Context, t *testing.T, opts engine.Options, key string) vfs.FS {
	t.Helper()
	fs := vfs.NewCrashableMem()
	opts.FS = fs
	e, err := engine.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	top, err := e.CreateTopic("t", engine.TopicConfig{Durability: engine.DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	r, err := p.Append(batch(t, 0, 0, 0, "a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitDurable(ctx, r.Last); err != nil {
		t.Fatal(err)
	}
	seq, err := p.SetBookmark(key, engine.Bookmark{Offset: 3, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SyncMeta(ctx, seq); err != nil {
		t.Fatal(err)
	}
	return fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
}
