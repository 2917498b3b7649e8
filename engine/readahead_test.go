package engine

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/record"
)

// bigBatch builds a batch of n records of size bytes each.
func bigBatch(t testing.TB, n, size int, tag byte) []byte {
	t.Helper()
	var b record.BatchBuilder
	v := bytes.Repeat([]byte{tag}, size)
	for i := 0; i < n; i++ {
		b.Append(record.Record{Timestamp: int64(i), Value: v})
	}
	batch, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

type readOut struct {
	batches []byte
	next    uint64
}

func (o readOut) String() string { return fmt.Sprintf("%d bytes, next %d", len(o.batches), o.next) }

// readOnce reads from from with maxBytes, through Execute (which may read
// ahead and take a read ahead) or through ExecuteInto with a fresh buffer
// (which does neither).
func readOnce(t *testing.T, p *Partition, from uint64, maxBytes int, ahead bool) readOut {
	t.Helper()
	plan, err := p.PlanRead(from, maxBytes)
	if err != nil {
		t.Fatalf("plan %d: %v", from, err)
	}
	defer plan.Release()
	var res ReadResult
	if ahead {
		res, err = plan.Execute(context.Background())
	} else {
		res, err = plan.ExecuteInto(context.Background(), nil)
	}
	if err != nil {
		t.Fatalf("read %d: %v", from, err)
	}
	var out readOut
	for _, b := range res.Batches {
		out.batches = append(out.batches, b...)
	}
	out.next = res.Next
	return out
}

// TestReadAheadReadsWhatAReadWould: sequential large reads (which read
// ahead), reads that skip forward or go back, and reads while the active
// segment grows return exactly what reads without a read ahead return.
func TestReadAheadReadsWhatAReadWould(t *testing.T) {
	e := mustOpen(t, testOptions(vfs.NewMem(), newFakeClock()))
	defer e.Close()
	top, err := e.CreateTopic("t", TopicConfig{SegmentBytes: 6 << 20, MaxBatchBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	for i := 0; i < 160; i++ {
		appendWait(t, p, bigBatch(t, 100, 1000, byte('a'+i%26)))
	}
	p.DropTailCache()

	const maxBytes = 2 << 20
	reads := 0
	read := func(from uint64) uint64 {
		got := readOnce(t, p, from, maxBytes, true)
		// Without reading ahead, at the same moment (ExecuteInto neither
		// starts nor takes a read ahead).
		want := readOnce(t, p, from, maxBytes, false)
		if got.next != want.next || !bytes.Equal(got.batches, want.batches) {
			t.Fatalf("read %d from %d: got %v, want %v", reads, from, got, want)
		}
		reads++
		return got.next
	}
	aheads := 0
	from := uint64(0)
	for step := 0; from < p.State().HighWatermark; step++ {
		next := read(from)
		p.mu.Lock()
		if p.tail.ahead != nil {
			aheads++
		}
		p.mu.Unlock()
		switch step {
		case 3:
			next += 150 // inside what was read ahead
		case 5:
			next -= 250 // behind it
		case 7:
			// The active segment grows past what was read ahead.
			for i := 0; i < 5; i++ {
				appendWait(t, p, bigBatch(t, 100, 1000, 'z'))
			}
			p.DropTailCache()
		}
		from = next
	}
	if aheads == 0 {
		t.Fatal("no read read ahead")
	}
}

// TestReadAheadAcrossPurge: a read ahead started before a purge never
// serves the reads after it.
func TestReadAheadAcrossPurge(t *testing.T) {
	e := mustOpen(t, testOptions(vfs.NewMem(), newFakeClock()))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 6 << 20, MaxBatchBytes: 256 << 10})
	p, _ := top.Partition(0)
	for i := 0; i < 60; i++ {
		appendWait(t, p, bigBatch(t, 100, 1000, 'a'))
	}
	p.DropTailCache()
	readOnce(t, p, 0, 2<<20, true)
	if _, err := p.Purge(); err != nil {
		t.Fatal(err)
	}
	start := p.State().HighWatermark
	for i := 0; i < 60; i++ {
		appendWait(t, p, bigBatch(t, 100, 1000, 'b'))
	}
	p.DropTailCache()
	for from := start; from < p.State().HighWatermark; {
		got := readOnce(t, p, from, 2<<20, true)
		want := readOnce(t, p, from, 2<<20, false)
		if got.next != want.next || !bytes.Equal(got.batches, want.batches) {
			t.Fatalf("from %d: got %v, want %v", from, got, want)
		}
		if bytes.IndexByte(got.batches, 'a') >= 0 && bytes.Contains(got.batches, bytes.Repeat([]byte{'a'}, 1000)) {
			t.Fatalf("from %d: a record from before the purge", from)
		}
		from = got.next
	}
}

// TestReleasedLargeReadBuffersAreReused: a replay's large reads (and their
// reads ahead) take their buffers from the buffers released results gave
// back; a result read into a reused buffer holds what a fresh read holds,
// and a result not released keeps its bytes while later reads go on.
func TestReleasedLargeReadBuffersAreReused(t *testing.T) {
	e := mustOpen(t, testOptions(vfs.NewMem(), newFakeClock()))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{SegmentBytes: 8 << 20, MaxBatchBytes: 256 << 10})
	p, _ := top.Partition(0)
	for i := 0; i < 200; i++ {
		appendWait(t, p, bigBatch(t, 100, 1000, byte('a'+i%26)))
	}
	p.DropTailCache()

	type kept struct {
		res  ReadResult
		copy []byte
	}
	var keep []kept
	released := map[*[]byte]bool{}
	reused := 0
	for from, i := uint64(0), 0; from < p.State().HighWatermark; i++ {
		res := execRead(t, p, from, 2<<20)
		if released[res.pooled] {
			reused++
		}
		want := readOnce(t, p, from, 2<<20, false)
		var got []byte
		for _, b := range res.Batches {
			got = append(got, b...)
		}
		if res.Next != want.next || !bytes.Equal(got, want.batches) {
			t.Fatalf("read %d from %d: %d bytes, next %d; want %v", i, from, len(got), res.Next, want)
		}
		from = res.Next
		if i%3 == 0 {
			keep = append(keep, kept{res, got})
			continue
		}
		released[res.pooled] = true
		res.Release()
	}
	if reused == 0 {
		t.Fatal("no read reused a released buffer")
	}
	for i, k := range keep {
		var now []byte
		for _, b := range k.res.Batches {
			now = append(now, b...)
		}
		if !bytes.Equal(now, k.copy) {
			t.Fatalf("kept result %d changed after later reads", i)
		}
	}
}
