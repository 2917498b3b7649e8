package engine

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/internal/allocs"
	"github.com/ledgemq/ledge/record"
)

// An append of a producer sending one message at a time allocates next to
// nothing: on a node with a small heap every allocated byte brings the
// next garbage collection closer, and those collections are the slowest
// acknowledgements of such a producer. The batch of one 1 KiB record of
// an idempotent producer, appended and waited for under policy none, is
// written by its appender; the only allocations left are the segment's
// sparse indexes growing (an entry per 4 KiB of log), once the producer
// records kept until the next fsync are compacted in place (past
// minProdCompact of them).
func TestAppendOneAtATimeAllocations(t *testing.T) {
	allocs.SkipUnderRace(t)
	const warm, runs = minProdCompact + 16, 200
	batches := producerBatches(t, warm+3*(runs+1))
	e := mustOpen(t, Options{FS: vfs.Default, Dir: t.TempDir(), ReservedBytes: -1})
	defer e.Close()
	top, err := e.CreateTopic("t", TopicConfig{Durability: DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	ctx := context.Background()
	next := 0
	appendOne := func() {
		r, err := p.Append(batches[next])
		next++
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WaitDurable(ctx, r.Last); err != nil {
			t.Fatal(err)
		}
	}
	for range warm {
		appendOne()
	}
	n, bytes := allocs.Least(runs, appendOne)
	t.Logf("per append: %.2f allocations, %.1f bytes", n, bytes)
	if n > 0.1 || bytes > 16 {
		t.Errorf("an append of one record allocates %.2f times, %.1f bytes (want at most 0.1 and 16: the index's growth)", n, bytes)
	}
}

// producerBatches returns n batches of one 1 KiB record of one idempotent
// producer, in sequence.
func producerBatches(t *testing.T, n int) [][]byte {
	t.Helper()
	v := make([]byte, 1024)
	out := make([][]byte, n)
	for i := range out {
		var bb record.BatchBuilder
		bb.SetProducer(7, 0, int32(i))
		bb.Append(record.Record{Timestamp: int64(i), Value: v})
		b, err := bb.Build(record.CompressionNone)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}
