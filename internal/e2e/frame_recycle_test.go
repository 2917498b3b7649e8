package e2e

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// Produce requests of 64 records of 1 KiB are read into recycled frame
// buffers: once the engine has written a batch nobody reads at the tail,
// the node reads the next request into the same memory. Whatever the
// reuse, every record reads back as it was produced, by a consumer at the
// tail while the producer runs (served from the tail cache) and by one
// reading the whole log afterwards (served from the files).
func TestE2ERecycledFramesNeverChangeStoredRecords(t *testing.T) {
	ctx, dial := servedNode(t)
	c := dial()
	if _, err := c.CreateTopic(ctx, "t", sdk.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "t", sdk.WithMaxBatchRecords(64), sdk.WithMaxInFlight(256))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	check := func(who string, r *sdk.Record) {
		t.Helper()
		want := recordValue(int(r.Offset))
		if string(r.Value) != string(want) {
			t.Fatalf("%s: record %d does not read back as produced", who, r.Offset)
		}
	}
	produce := func(from, to int) {
		t.Helper()
		recs := make([]*sdk.Record, 0, to-from)
		for i := from; i < to; i++ {
			recs = append(recs, &sdk.Record{Value: recordValue(i)})
		}
		if err := p.ProduceSync(ctx, recs...); err != nil {
			t.Fatal(err)
		}
	}

	// Nobody reads: the frames are recycled.
	produce(0, 3000)

	// A consumer follows the tail while the producer goes on.
	tail, err := c.NewConsumer(ctx, "t", sdk.WithStart(sdk.AtEnd()), sdk.WithMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close(context.Background())
	if _, err := tail.Poll(ctx); err != nil { // reaches the tail
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	seen := make(chan int, 1)
	wg.Go(func() {
		n := 0
		for n < 3000 {
			recs, err := tail.Poll(ctx)
			if err != nil {
				t.Error(err)
				break
			}
			for _, r := range recs {
				check("tail consumer", r)
			}
			n += len(recs)
		}
		seen <- n
	})
	for i := 3000; i < 6000; i += 500 {
		produce(i, i+500)
	}
	wg.Wait()
	if n := <-seen; n != 3000 {
		t.Fatalf("tail consumer saw %d records, want 3000", n)
	}

	// Everything, from the start.
	all, err := c.NewConsumer(ctx, "t", sdk.WithStart(sdk.AtFirst()))
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close(context.Background())
	for next := 0; next < 6000; {
		recs, err := all.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if int(r.Offset) != next {
				t.Fatalf("record %d where %d was due", r.Offset, next)
			}
			check("reader from the start", r)
			next++
		}
	}
}

// Replays read the log in polls of several MiB into buffers the engine
// takes back once each reply is written, and reads the next polls into
// them; two of the consumers hand their records' buffers back too
// (sdk.Recycle), for their next replies, and for the node's requests, to
// be read into. Three consumers replaying the same log at once, each reply
// written while the others' reads go on, all read every record as it was
// produced.
func TestE2EReplaysReuseReadBuffersWithoutChangingRecords(t *testing.T) {
	ctx, dial := servedNode(t)
	c := dial()
	if _, err := c.CreateTopic(ctx, "t", sdk.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "t", sdk.WithMaxBatchRecords(100), sdk.WithMaxInFlight(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	const total = 16000 // 16 MiB: four polls of 4 MiB each
	for i := 0; i < total; i += 1000 {
		recs := make([]*sdk.Record, 0, 1000)
		for j := i; j < i+1000; j++ {
			recs = append(recs, &sdk.Record{Value: recordValue(j)})
		}
		if err := p.ProduceSync(ctx, recs...); err != nil {
			t.Fatal(err)
		}
	}

	var wg sync.WaitGroup
	for k := 0; k < 3; k++ {
		cons, err := c.NewConsumer(ctx, "t", sdk.WithStart(sdk.AtFirst()))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close(context.Background())
		wg.Go(func() {
			for next := 0; next < total; {
				recs, err := cons.Poll(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range recs {
					if int(r.Offset) != next || string(r.Value) != string(recordValue(next)) {
						t.Errorf("consumer %d: record %d (offset %d) does not read back as produced", k, next, r.Offset)
						return
					}
					next++
				}
				if k < 2 {
					sdk.Recycle(recs)
				}
			}
		})
	}
	wg.Wait()
}

// recordValue is the 1 KiB value of record i: every 8 bytes name the
// record and their place in it, so a byte from anywhere else shows.
func recordValue(i int) []byte {
	v := make([]byte, 1024)
	for j := 0; j+8 <= len(v); j += 8 {
		binary.LittleEndian.PutUint64(v[j:], uint64(i)<<20|uint64(j))
	}
	return v
}
