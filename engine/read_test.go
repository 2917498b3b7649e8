package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSuspendedReadAcrossPurge suspends a read at the file read
// (Options.BeforeRead), purges and deletes the segment it reads while it
// waits, then resumes it: the read returns the bytes it planned to read,
// intact, and nothing it does touches the partition.
func TestSuspendedReadAcrossPurge(t *testing.T) {
	reached := make(chan ReadInfo, 1)
	var gate atomic.Pointer[chan struct{}]
	resume := make(chan struct{})
	gate.Store(&resume)
	opts := testOptions(vfs.NewMem(), newFakeClock())
	opts.BeforeRead = func(ctx context.Context, r ReadInfo) error {
		if r.Topic != "t" {
			return nil
		}
		select {
		case reached <- r:
		default: // a later read, while nobody waits for one
		}
		select {
		case <-*gate.Load():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e := mustOpen(t, opts)
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024})
	p, _ := top.Partition(0)
	appendWait(t, p, makeBatch(t, "old", 3, 0))
	p.DropTailCache()
	plan, err := p.PlanRead(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	type out struct {
		res ReadResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := plan.Execute(context.Background())
		done <- out{res, err}
	}()
	info := <-reached
	if info.Pos != 0 || info.Partition != 0 {
		t.Fatalf("suspended at %+v", info)
	}
	st, err := p.Purge()
	if err != nil {
		t.Fatal(err)
	}
	r := appendWait(t, p, makeBatch(t, "new", 5, 0))
	fillSegments(t, p, 60) // rolls, so the purged segment is deleted
	close(resume)
	o := <-done
	plan.Release()
	if o.err != nil {
		t.Fatalf("resumed read: %v", o.err)
	}
	if len(o.res.Batches) != 1 || o.res.Next != 3 {
		t.Fatalf("resumed read returned %d batches, next %d", len(o.res.Batches), o.res.Next)
	}
	if st.LogStart != 3 || r.Base != 3 {
		t.Fatalf("purge start %d, first new offset %d", st.LogStart, r.Base)
	}
	// A plan made now sees the new history only.
	if _, err := p.PlanRead(0, 100); !errors.As(err, new(*OutOfRangeError)) {
		t.Fatalf("read of the purged history: %v", err)
	}
	got, _ := readAll(t, p, st.LogStart)
	if got[0].value != "new-0" {
		t.Fatalf("first record after purge %+v", got[0])
	}
	// A suspended read honors its context.
	p.DropTailCache()
	never := make(chan struct{})
	gate.Store(&never)
	plan, _ = p.PlanRead(st.LogStart, 100)
	defer plan.Release()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-reached; cancel() }()
	if _, err := plan.Execute(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v", err)
	}
}

func TestReadResultsAreWholeBatchesWithinMaxBytes(t *testing.T) {
	e := mustOpen(t, testOptions(vfs.NewMem(), newFakeClock()))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{})
	p, _ := top.Partition(0)
	var sizes []int
	for i := 0; i < 20; i++ {
		b := makeBatch(t, "x", 1+i, 0)
		sizes = append(sizes, len(b))
		appendWait(t, p, b)
	}
	for _, drop := range []bool{false, true} {
		if drop {
			p.DropTailCache()
		}
		plan, _ := p.PlanRead(0, sizes[0]+sizes[1]+1)
		res, err := plan.Execute(context.Background())
		plan.Release()
		if err != nil {
			t.Fatal(err)
		}
		// At least one batch, whole batches, stopping once maxBytes is reached.
		if len(res.Batches) != 3 || len(res.Batches[0]) != sizes[0] || res.Next != 1+2+3 {
			t.Fatalf("drop=%v: %d batches, next %d", drop, len(res.Batches), res.Next)
		}
		// Reading from inside a batch returns the whole batch.
		plan, _ = p.PlanRead(4, 1)
		res, _ = plan.Execute(context.Background())
		plan.Release()
		if len(res.Batches) != 1 || len(res.Batches[0]) != sizes[2] || res.Next != 6 {
			t.Fatalf("drop=%v: read from inside a batch: %d batches, next %d", drop, len(res.Batches), res.Next)
		}
		res.Release()
	}
}
