package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/record"
)

// fakeClock is a settable wall clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func testOptions(fs vfs.FS, clock *fakeClock) Options {
	return Options{
		FS: fs, Dir: "data", Now: clock.Now,
		ReservedBytes:   -1,
		ReservationStep: 1000,
	}
}

func mustOpen(t testing.TB, opts Options) *Engine {
	t.Helper()
	e, err := Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return e
}

// makeBatch builds a batch of n records whose values name their index and
// carry tag, with timestamps ts, ts+1, ....
func makeBatch(t testing.TB, tag string, n int, ts int64) []byte {
	t.Helper()
	var b record.BatchBuilder
	for i := 0; i < n; i++ {
		b.Append(record.Record{Timestamp: ts + int64(i), Value: []byte(fmt.Sprintf("%s-%d", tag, i))})
	}
	batch, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func appendWait(t testing.TB, p *Partition, batch []byte) AppendResult {
	t.Helper()
	r, err := p.Append(batch)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := p.WaitDurable(context.Background(), r.Last); err != nil {
		t.Fatalf("wait durable %d: %v", r.Last, err)
	}
	return r
}

// readRecords reads every record from off up to the high watermark.
type readRec struct {
	off   uint64
	ts    int64
	value string
}

// execRead plans a read from from of at most maxBytes and executes it.
func execRead(t testing.TB, p *Partition, from uint64, maxBytes int) ReadResult {
	t.Helper()
	plan, err := p.PlanRead(from, maxBytes)
	if err != nil {
		t.Fatalf("plan read %d: %v", from, err)
	}
	res, err := plan.Execute(context.Background())
	plan.Release()
	if err != nil {
		t.Fatalf("read %d: %v", from, err)
	}
	return res
}

func readAll(t testing.TB, p *Partition, from uint64) ([]readRec, uint64) {
	t.Helper()
	var out []readRec
	for {
		res := execRead(t, p, from, 64<<10)
		for _, b := range res.Batches {
			it, err := record.NewRecordIterator(b, 0)
			if err != nil {
				t.Fatalf("batch at %d: %v", from, err)
			}
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				if r.Offset >= from {
					out = append(out, readRec{r.Offset, r.Timestamp, string(r.Value)})
				}
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
		}
		if res.Next == from {
			return out, from
		}
		from = res.Next
	}
}

// setProducer sets the producer fields of a built batch and re-computes
// its CRC.
func setProducer(b []byte, id uint64, epoch uint32, seq int32) {
	binary.LittleEndian.PutUint64(b[48:], id)
	binary.LittleEndian.PutUint32(b[56:], epoch)
	binary.LittleEndian.PutUint32(b[60:], uint32(seq))
	binary.LittleEndian.PutUint32(b[12:], record.BatchChecksum(b))
}

// isSegment reports whether path is a segment file of a topic (pebble's
// WAL files end in .log too).
func isSegment(path string) bool {
	return strings.Contains(path, topicsDirName) && strings.HasSuffix(path, segmentExt)
}
