package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/internal/fullfs"
)

// TestRestartOnAFullDisk: the node is killed with its disk full and
// restarts on it. It comes up (the metadata store replays its log into a
// table in the room the ballast gave up), serves every acknowledged
// record, takes commits, refuses appends with the retryable ErrNoSpace,
// says so in Space, and resumes appends by itself once space is freed.
func TestRestartOnAFullDisk(t *testing.T) {
	mem := vfs.NewCrashableMem()
	clock := newFakeClock()
	fs := fullfs.Wrap(mem, "", 64<<20)
	opts := testOptions(fs, clock)
	opts.ReservedBytes = 1 << 20
	e := mustOpen(t, opts)
	top, err := e.CreateTopic("t", TopicConfig{SegmentBytes: 256 << 10, MaxBatchBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	fs.Fill(3 << 20)
	acked := appendUntilFull(t, p, 1000)
	// Space is freed a little: an idempotent producer's batch goes in,
	// and the disk fills again.
	fs.SetBudget(fs.Used() + 3<<20)
	clock.Advance(spaceProbeInterval)
	idem := makeBatch(t, "idem", 5, 0)
	setProducer(idem, 7, 0, 0)
	ir := appendWait(t, p, idem)
	acked = append(acked, appendUntilFull(t, p, 1000)...)
	last := acked[len(acked)-1].Last
	if _, err := p.SetBookmark("reader", Bookmark{Offset: 10}); err != nil {
		t.Fatalf("commit on a full disk: %v", err)
	}

	// SIGKILL: everything fsynced survives, the rest may not.
	budget := fs.Used() + 64<<10
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	fs = fullfs.Wrap(crashed, "", budget)
	opts.FS = fs
	e2, err := OpenContext(context.Background(), opts)
	if err != nil {
		t.Fatalf("restart on a full disk: %v", err)
	}
	defer e2.Close()
	if sp := e2.Space(); !sp.Full {
		t.Fatalf("after a restart on a full disk: %+v", sp)
	}
	top, _ = e2.Topic("t")
	p, _ = top.Partition(0)
	mustBeServing(t, p)
	served := make(map[uint64]string)
	recs, _ := readAll(t, p, 0)
	for _, r := range recs {
		served[r.off] = r.value
	}
	for _, a := range append(acked, ir) {
		for off := a.Base; off <= a.Last; off++ {
			if _, ok := served[off]; !ok {
				t.Fatalf("acknowledged offset %d not served after a restart on a full disk", off)
			}
		}
	}
	if served[ir.Base] != "idem-0" {
		t.Fatalf("offset %d holds %q", ir.Base, served[ir.Base])
	}
	seq, err := p.SetBookmark("reader", Bookmark{Offset: 20})
	if err == nil {
		err = e2.SyncMeta(context.Background(), seq)
	}
	if err != nil {
		t.Fatalf("commit after a restart on a full disk: %v", err)
	}
	if ps, ok := p.ProducerState(7); !ok || ps.Len() == 0 || ps.Batch(0).Base != ir.Base || ps.Batch(0).LastSeq != 4 {
		t.Fatalf("producer 7 after a restart on a full disk: %+v, %v (its batch was at %d)", ps, ok, ir.Base)
	}
	if _, err := p.Append(makeBatch(t, "refused", 2, 0)); !errors.Is(err, ErrNoSpace) || !Retryable(err) {
		t.Fatalf("append after a restart on a full disk: %v", err)
	}

	fs.SetBudget(64 << 20) // an operator frees space
	clock.Advance(spaceProbeInterval)
	r := appendWait(t, p, makeBatch(t, "resumed", 2, 0))
	if r.Base <= last {
		t.Fatalf("offset %d reused (acknowledged up to %d)", r.Base, last)
	}
	if sp := e2.Space(); sp.Full || !sp.Reserved {
		t.Fatalf("after space was freed: %+v", sp)
	}
}

// TestOpenStopsWhileTheDiskHasNoRoom: the disk is full to its last byte,
// ballast included (another program took the room), and the metadata
// store cannot replay its log. Open waits for room, pacing the store's
// retries and limiting their log lines, and gives up as soon as its
// context is done: a node told to stop during start-up stops.
func TestOpenStopsWhileTheDiskHasNoRoom(t *testing.T) {
	mem := vfs.NewCrashableMem()
	opts := testOptions(mem, newFakeClock())
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{})
	p, _ := top.Partition(0)
	appendWait(t, p, makeBatch(t, "a", 10, 0))
	if _, err := p.SetBookmark("reader", Bookmark{Offset: 3}); err != nil {
		t.Fatal(err)
	}
	if err := e.SyncMeta(context.Background(), MetaSeq(e.metaSeq.Load())); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	fs := fullfs.Wrap(crashed, "", 0)
	fs.Fill(0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lines atomic.Int64
	opts.FS = fs
	opts.Logger = slog.New(&lineHook{on: func(msg string) {
		if strings.HasPrefix(msg, "metadata: background error") {
			lines.Add(1)
			cancel() // SIGTERM once the store is stuck
		}
	}})
	_, err := OpenContext(ctx, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("open on a disk with no room, stopped: %v", err)
	}
	if fs.Refusals() == 0 || lines.Load() == 0 {
		t.Fatalf("the store never met the full disk (%d refusals, %d lines)", fs.Refusals(), lines.Load())
	}
}

// TestMetadataErrorsAreLimited: a run of the metadata store's background
// errors logs its first, then one line per metaLogEvery however many
// come; each is counted in Space.
func TestMetadataErrorsAreLimited(t *testing.T) {
	var lines atomic.Int64
	opts := testOptions(vfs.NewMem(), newFakeClock())
	opts.Logger = slog.New(&lineHook{on: func(msg string) {
		if strings.HasPrefix(msg, "metadata:") {
			lines.Add(1)
		}
	}})
	e := mustOpen(t, opts)
	defer e.Close()
	e.space.meta.stopPacing() // no pauses: the test calls it in a loop
	for i := 0; i < 10000; i++ {
		e.backgroundError(errors.New("write meta/000042.sst: no space left on device"))
	}
	if n := lines.Load(); n > 2 {
		t.Fatalf("10000 background errors in a run wrote %d log lines", n)
	}
	if got := e.Space().MetadataErrors; got != 10000 {
		t.Fatalf("counted %d background errors", got)
	}
}

// lineHook is a slog handler that calls on with every message.
type lineHook struct{ on func(string) }

func (h *lineHook) Enabled(context.Context, slog.Level) bool      { return true }
func (h *lineHook) Handle(_ context.Context, r slog.Record) error { h.on(r.Message); return nil }
func (h *lineHook) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h *lineHook) WithGroup(string) slog.Handler                 { return h }
