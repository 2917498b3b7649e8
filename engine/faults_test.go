package engine

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ledgemq/ledge/engine/internal/codec"
)

// TestNoSpace: a full disk refuses the append with a retryable error,
// earlier data stays readable, retention and purge still run, and a later
// append succeeds once space is back.
func TestNoSpace(t *testing.T) {
	mem := vfs.NewMem()
	var full atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind == errorfs.OpFileWriteAt && isSegment(op.Path) {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	clock := newFakeClock()
	opts := testOptions(fs, clock)
	opts.ReservedBytes = 1 << 16
	e := mustOpen(t, opts)
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024, RetentionBytes: 4096})
	p, _ := top.Partition(0)
	fillSegments(t, p, 60)
	hw := p.State().HighWatermark

	full.Store(true)
	b := makeBatch(t, "full", 2, 0)
	setProducer(b, 9, 0, 0)
	r, err := p.Append(b)
	if err != nil {
		t.Fatalf("append is refused only when written: %v", err)
	}
	err = p.WaitDurable(context.Background(), r.Last)
	if !errors.Is(err, ErrNoSpace) || !Retryable(err) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if _, ok := p.ProducerState(9); ok {
		t.Fatal("a refused append left producer state behind")
	}
	if st := p.State(); st.HighWatermark != hw || st.Failed != nil {
		t.Fatalf("after a refused append: %+v (hw was %d)", st, hw)
	}
	p.DropTailCache()
	if got, _ := readAll(t, p, p.State().LogStart); len(got) == 0 {
		t.Fatal("earlier data unreadable on a full disk")
	}
	if _, err := p.EnforceRetention(opts.Now(), NoRetentionFloor); err != nil {
		t.Fatalf("retention on a full disk: %v", err)
	}
	if _, err := mem.Stat(mem.PathJoin("data", ballastName)); err == nil {
		t.Error("the reserved space was not released")
	}

	full.Store(false)
	// This file system cannot say how much room it has: the next append
	// due to look for room (a second on) tries the write.
	clock.Advance(spaceProbeInterval)
	r2 := appendWait(t, p, makeBatch(t, "back", 2, 0))
	if r2.Base <= r.Last {
		t.Fatalf("offset %d reused after a refused append (refused %d..%d)", r2.Base, r.Base, r.Last)
	}
	got, _ := readAll(t, p, r2.Base)
	if len(got) != 2 || got[0].value != "back-0" {
		t.Fatalf("after space came back: %+v", got)
	}
	if _, err := p.Purge(); err != nil {
		t.Fatalf("purge: %v", err)
	}
}

// TestFailedFsyncFailsPartition: a failed fsync is never retried on that
// file; the partition refuses appends, unacknowledged appends fail saying
// to restart, and a restart keeps what was durable.
//
// covers: G24
func TestFailedFsyncFailsPartition(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var fail atomic.Bool
	var syncsAfter atomic.Int32
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if (op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSync) && isSegment(op.Path) {
			if fail.Load() {
				syncsAfter.Add(1)
				return errors.New("injected EIO")
			}
		}
		return nil
	}))
	opts := testOptions(fs, newFakeClock())
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{Durability: DurabilityAlways})
	p, _ := top.Partition(0)
	acked := appendWait(t, p, makeBatch(t, "ok", 3, 0))
	fail.Store(true)
	r, _ := p.Append(makeBatch(t, "lost", 3, 0))
	err := p.WaitDurable(context.Background(), r.Last)
	if !errors.Is(err, ErrPartitionFailed) || !strings.Contains(err.Error(), "restart") || Retryable(err) {
		t.Fatalf("wait after a failed fsync: %v", err)
	}
	if _, err := p.Append(makeBatch(t, "more", 1, 0)); !errors.Is(err, ErrPartitionFailed) {
		t.Fatalf("append after a failed fsync: %v", err)
	}
	if p.State().Failed == nil || p.State().HighWatermark != acked.Last+1 {
		t.Fatalf("state after a failed fsync: %+v", p.State())
	}
	calls := syncsAfter.Load()
	_, _ = p.Purge()
	_ = e.Close()
	if n := syncsAfter.Load(); n != calls || calls != 1 {
		t.Fatalf("fsync called %d times after it failed once", n)
	}
	// Power loss, restart: what was acknowledged is there.
	opts.FS = mem.CrashClone(vfs.CrashCloneCfg{})
	e = mustOpen(t, opts)
	defer e.Close()
	top, _ = e.Topic("t")
	p, _ = top.Partition(0)
	got, _ := readAll(t, p, 0)
	if len(got) < 3 || got[2].value != "ok-2" || p.State().Failed != nil {
		t.Fatalf("after restart: %+v %+v", got, p.State())
	}
	// The failed append was neither acknowledged nor seen by a reader:
	// numbering continues at the log's end, nothing skipped.
	if r := appendWait(t, p, makeBatch(t, "again", 1, 0)); r.Base != acked.Last+1 {
		t.Fatalf("the next append took offset %d, want %d (the log's end)", r.Base, acked.Last+1)
	}
}

// TestCorruptDurableMiddleIsRefused: damage before the durable checkpoint
// is corruption, reported with file and position; other partitions serve.
func TestCorruptDurableMiddleIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(fs, newFakeClock())
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{Partitions: 2, Durability: DurabilityAlways})
	p0, _ := top.Partition(0)
	p1, _ := top.Partition(1)
	for i := 0; i < 10; i++ {
		appendWait(t, p0, makeBatch(t, "a", 2, 0))
		appendWait(t, p1, makeBatch(t, "b", 2, 0))
	}
	path := p0.segmentPath(0, segmentExt)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Flip a byte inside the fourth batch.
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	pos := st.Size() / 3
	b := []byte{0}
	_, _ = f.ReadAt(b, pos)
	b[0] ^= 0xff
	_, _ = f.WriteAt(b, pos)
	_ = f.Close()
	// Remove the index too, so recovery must read the file.
	_ = fs.Remove(indexPath(path))

	e = mustOpen(t, opts)
	defer e.Close()
	top, _ = e.Topic("t")
	p0, _ = top.Partition(0)
	p1, _ = top.Partition(1)
	var ce *CorruptLogError
	if !errors.As(p0.State().Failed, &ce) || ce.File != path || ce.Pos <= 0 || ce.Pos > pos {
		t.Fatalf("corrupt partition state: %v", p0.State().Failed)
	}
	if _, err := p0.PlanRead(0, 100); !errors.As(err, &ce) {
		t.Fatalf("read of a corrupt partition: %v", err)
	}
	if _, err := p0.Append(makeBatch(t, "x", 1, 0)); !errors.As(err, &ce) {
		t.Fatalf("append to a corrupt partition: %v", err)
	}
	if got, _ := readAll(t, p1, 0); len(got) != 20 {
		t.Fatalf("healthy partition read %d records", len(got))
	}
}

// TestNewerFormatRefused: a store written by a newer schema, or a value of
// a newer version, is refused with a clear error.
func TestNewerFormatRefused(t *testing.T) {
	for _, which := range []string{"schema", "value"} {
		t.Run(which, func(t *testing.T) {
			fs := vfs.NewMem()
			opts := testOptions(fs, newFakeClock())
			e := mustOpen(t, opts)
			top, _ := e.CreateTopic("t", TopicConfig{})
			id := top.ID()
			_ = e.Close()
			db, err := pebble.Open(fs.PathJoin("data", metaDirName), &pebble.Options{FS: fs, Logger: newMetaLogger(slog.New(slog.DiscardHandler))})
			if err != nil {
				t.Fatal(err)
			}
			switch which {
			case "schema":
				_ = db.Set(schemaKey, codec.Seal(nil, kindSchema, kindVersion, []byte{schemaVersion + 1}), pebble.Sync)
			case "value":
				_ = db.Set(topicKey('C', id), codec.Seal(nil, kindTopic, kindVersion+1, []byte("future")), pebble.Sync)
			}
			_ = db.Close()
			_, err = Open(opts)
			if !errors.Is(err, ErrUnsupportedFormat) || !strings.Contains(err.Error(), "upgrade") {
				t.Fatalf("open of a newer store: %v", err)
			}
		})
	}
}
