package sdk

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var seeds = flag.Int("sdk.seeds", 20, "seeds of the randomized producer tests")

func testProducer(t *testing.T, n *fakeNode, parts int, opts ...ProducerOption) *Producer {
	t.Helper()
	info := TopicInfo{Name: "t", Config: TopicConfig{Partitions: parts}}
	p, err := newProducer(context.Background(), n, slog.New(slog.DiscardHandler), info, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// outcome of one produced record, as its callback saw it.
type produced struct {
	value     string
	partition int32
	offset    uint64
	err       error
}

// produceAll produces count records (values "v0", "v1", ...) with keys
// spread over the partitions, closes the producer and returns what each
// callback saw, by value.
func produceAll(t *testing.T, p *Producer, count int) map[string]produced {
	t.Helper()
	var mu sync.Mutex
	out := map[string]produced{}
	ctx := context.Background()
	for i := range count {
		v := fmt.Sprintf("v%d", i)
		rec := &Record{Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(v)}
		p.Produce(ctx, rec, func(r *Record, err error) {
			mu.Lock()
			out[v] = produced{value: v, partition: r.Partition, offset: r.Offset, err: err}
			mu.Unlock()
		})
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if len(out) != count {
		t.Fatalf("%d callbacks for %d records", len(out), count)
	}
	return out
}

// checkLog asserts that each partition's log holds exactly the records
// whose callbacks succeeded, each once, in production order, at the
// offsets the callbacks reported.
func checkLog(t *testing.T, n *fakeNode, parts int, out map[string]produced) {
	t.Helper()
	byPart := map[int32][]produced{}
	for _, r := range out {
		if r.err == nil {
			byPart[r.partition] = append(byPart[r.partition], r)
		}
	}
	for p := range parts {
		want := byPart[int32(p)]
		slices.SortFunc(want, func(a, b produced) int {
			var x, y int
			fmt.Sscanf(a.value, "v%d", &x)
			fmt.Sscanf(b.value, "v%d", &y)
			return x - y
		})
		got := n.values(uint32(p))
		var wantValues []string
		for _, r := range want {
			wantValues = append(wantValues, r.value)
		}
		if !slices.Equal(got, wantValues) {
			t.Fatalf("partition %d holds %d records %v\nwant %d %v", p, len(got), head(got), len(wantValues), head(wantValues))
		}
		for i, r := range want {
			if r.offset != uint64(i) {
				t.Fatalf("partition %d: %s acknowledged at offset %d, stored at %d", p, r.value, r.offset, i)
			}
		}
	}
}

// randomFaults injects one of faults into one request in oneIn, from a
// random source per partition (the partitions' requests interleave in no
// fixed order; each partition's own requests do).
func randomFaults(seed uint64, oneIn int, faults ...fault) func(int, uint32) fault {
	var mu sync.Mutex
	rngs := map[uint32]*rand.Rand{}
	return func(_ int, p uint32) fault {
		mu.Lock()
		defer mu.Unlock()
		rng := rngs[p]
		if rng == nil {
			rng = rand.New(rand.NewPCG(seed, uint64(p)))
			rngs[p] = rng
		}
		if rng.IntN(oneIn) == 0 {
			return faults[rng.IntN(len(faults))]
		}
		return faultNone
	}
}

// checkLogMaybe is checkLog for runs where records may fail with an
// unknown outcome: each partition's log holds every acknowledged record,
// at its acknowledged offset, and maybe some of the records of unknown
// outcome, each at most once; nothing else, in production order.
func checkLogMaybe(t *testing.T, n *fakeNode, parts int, out map[string]produced) {
	t.Helper()
	for p := range parts {
		last := -1
		seen := map[string]bool{}
		for i, v := range n.values(uint32(p)) {
			r, ok := out[v]
			switch {
			case !ok:
				t.Fatalf("partition %d offset %d: %s was never produced", p, i, v)
			case seen[v]:
				t.Fatalf("partition %d offset %d: %s written twice", p, i, v)
			case r.partition != int32(p):
				t.Fatalf("partition %d offset %d: %s belongs to partition %d", p, i, v, r.partition)
			case r.err == nil && r.offset != uint64(i):
				t.Fatalf("partition %d: %s acknowledged at %d, stored at %d", p, v, r.offset, i)
			case r.err != nil && !errors.Is(r.err, ErrUnknownOutcome):
				t.Fatalf("partition %d offset %d: %s written although it failed with %v", p, i, v, r.err)
			}
			seen[v] = true
			var k int
			fmt.Sscanf(v, "v%d", &k)
			if k < last {
				t.Fatalf("partition %d offset %d: %s after v%d", p, i, v, last)
			}
			last = k
		}
		for v, r := range out {
			if r.err == nil && r.partition == int32(p) && !seen[v] {
				t.Fatalf("partition %d: acknowledged %s is missing", p, v)
			}
		}
	}
}

func head(s []string) []string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func TestProducerOrderAndOffsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		p := testProducer(t, n, 3, WithMaxBatchRecords(7), WithMaxInFlight(20))
		out := produceAll(t, p, 500)
		for _, r := range out {
			if r.err != nil {
				t.Fatalf("%s failed: %v", r.value, r.err)
			}
		}
		checkLog(t, n, 3, out)
		if n.inits != 1 {
			t.Fatalf("%d producer inits, want 1", n.inits)
		}
	})
}

// TestProducerRetriesNeverDuplicate injects busy nodes, timeouts after an
// append, streams broken before and after an append: every record is
// written exactly once, in order.
func TestProducerRetriesNeverDuplicate(t *testing.T) {
	for seed := range uint64(*seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				n := newFakeNode()
				n.fault = randomFaults(seed, 8, faultBusy, faultTimeoutAfter, faultBreakAfter, faultBreakBefore)
				p := testProducer(t, n, 2, WithMaxBatchRecords(1+rng.IntN(10)), WithMaxInFlight(1+rng.IntN(60)))
				out := produceAll(t, p, 400)
				for _, r := range out {
					if r.err != nil {
						t.Fatalf("%s failed: %v", r.value, r.err)
					}
				}
				checkLog(t, n, 2, out)
				if n.inits != 1 {
					t.Fatalf("%d producer inits, want 1 (retries keep the identity)", n.inits)
				}
			})
		})
	}
}

// TestProducerAllFaults adds refused batches, forgotten producers and
// hung requests to the mix: records fail only where a batch was refused,
// and the rest are written exactly once, in order.
func TestProducerAllFaults(t *testing.T) {
	for seed := range uint64(*seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				n := newFakeNode()
				n.fault = randomFaults(seed, 6+rng.IntN(10), faultBusy, faultTimeoutAfter, faultBreakAfter, faultBreakBefore,
					faultInvalid, faultForgetProducer, faultHang)
				parts := 1 + rng.IntN(3)
				p := testProducer(t, n, parts, WithMaxBatchRecords(1+rng.IntN(10)), WithMaxInFlight(1+rng.IntN(60)))
				out := produceAll(t, p, 300)
				for _, r := range out {
					if r.err != nil && !errors.Is(r.err, ErrInvalidBatch) && !errors.Is(r.err, ErrUnknownOutcome) {
						t.Fatalf("%s failed: %v", r.value, r.err)
					}
				}
				checkLogMaybe(t, n, parts, out)
			})
		})
	}
}

// TestProducerRefusedBatchClosesTheGap: a batch refused for good fails its
// records; the batches behind it, which the node refused for the gap, are
// renumbered and written, without a new identity.
func TestProducerRefusedBatchClosesTheGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		n.fault = func(k int, _ uint32) fault {
			if k == 3 {
				return faultInvalid
			}
			return faultNone
		}
		p := testProducer(t, n, 1, WithMaxBatchRecords(5), WithMaxInFlight(40), WithLinger(time.Hour))
		out := produceAll(t, p, 100)
		failed := 0
		for _, r := range out {
			if r.err != nil {
				failed++
				if !errors.Is(r.err, ErrInvalidBatch) {
					t.Fatalf("%s: %v, want invalid batch", r.value, r.err)
				}
			}
		}
		if failed != 5 {
			t.Fatalf("%d records failed, want one batch of 5", failed)
		}
		checkLog(t, n, 1, out)
		if n.inits != 1 {
			t.Fatalf("%d producer inits, want 1", n.inits)
		}
	})
}

// TestProducerUnknownProducerReinitializes: when the node no longer knows
// the producer, the partition takes a fresh identity and resends.
func TestProducerUnknownProducerReinitializes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		n.fault = func(k int, _ uint32) fault {
			if k == 10 {
				return faultForgetProducer
			}
			return faultNone
		}
		p := testProducer(t, n, 1, WithMaxBatchRecords(4), WithMaxInFlight(16))
		out := produceAll(t, p, 200)
		for _, r := range out {
			if r.err != nil {
				t.Fatalf("%s failed: %v", r.value, r.err)
			}
		}
		checkLog(t, n, 1, out)
		if n.inits != 2 {
			t.Fatalf("%d producer inits, want 2", n.inits)
		}
	})
}

// TestProducerDeliveryTimeout: a node that never answers fails the records
// after the delivery timeout, saying they may have been written.
func TestProducerDeliveryTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		n.fault = func(int, uint32) fault { return faultHang }
		p := testProducer(t, n, 1, WithDeliveryTimeout(10*time.Second))
		start := time.Now()
		out := produceAll(t, p, 30)
		if d := time.Since(start); d < 10*time.Second || d > 15*time.Second {
			t.Fatalf("records failed after %v, want about the 10 s delivery timeout", d)
		}
		for _, r := range out {
			if !errors.Is(r.err, ErrDeliveryTimeout) {
				t.Fatalf("%s: %v, want ErrDeliveryTimeout", r.value, r.err)
			}
		}
	})
}

// TestProducerDuplicateSequenceKeepsNumbering: a batch the node reports as
// appended long ago fails with ErrDuplicateSequence; the batches after it
// keep their numbers.
func TestProducerDuplicateSequenceKeepsNumbering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		n.fault = func(k int, _ uint32) fault {
			if k == 0 {
				return faultDuplicateNoOffsets
			}
			return faultNone
		}
		p := testProducer(t, n, 1, WithMaxBatchRecords(10), WithLinger(time.Hour))
		out := produceAll(t, p, 10)
		for _, r := range out {
			if !errors.Is(r.err, ErrDuplicateSequence) {
				t.Fatalf("%s: %v, want ErrDuplicateSequence", r.value, r.err)
			}
		}
	})
}

func TestProducerRejectsOversizedRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		p := testProducer(t, n, 1, WithMaxBatchBytes(4<<10))
		var got error
		p.Produce(context.Background(), &Record{Value: make([]byte, 8<<10)}, func(_ *Record, err error) { got = err })
		if !errors.Is(got, ErrMessageTooLarge) {
			t.Fatalf("got %v, want ErrMessageTooLarge", got)
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestProducerFlushAndLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		p := testProducer(t, n, 1, WithLinger(time.Hour), WithMaxBatchRecords(1000))
		ctx := context.Background()
		for i := range 10 {
			p.Produce(ctx, &Record{Value: []byte(fmt.Sprint(i))}, nil)
		}
		synctest.Wait()
		if got := len(n.values(0)); got != 0 {
			t.Fatalf("%d records sent during the linger", got)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := len(n.values(0)); got != 10 {
			t.Fatalf("%d records after Flush, want 10", got)
		}
		if n.requests != 1 {
			t.Fatalf("%d requests, want the 10 records in one batch", n.requests)
		}
		_ = p.Close(ctx)
	})
}

// TestProducerWithoutIdempotence sends batches without a producer id; with
// busy refusals (nothing written) retries still write each record once.
func TestProducerWithoutIdempotence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		n.fault = randomFaults(3, 5, faultBusy)
		p := testProducer(t, n, 2, WithIdempotence(false), WithMaxBatchRecords(4))
		out := produceAll(t, p, 100)
		for _, r := range out {
			if r.err != nil {
				t.Fatalf("%s failed: %v", r.value, r.err)
			}
		}
		checkLog(t, n, 2, out)
		if n.inits != 0 {
			t.Fatalf("%d producer inits without idempotence", n.inits)
		}
		for p := range uint32(2) {
			for _, r := range n.parts[p].log {
				if r.producer != 0 {
					t.Fatalf("a batch carried producer id %d", r.producer)
				}
			}
		}
	})
}

// produceOneAtATime produces count records (values "v0", "v1", ...) on
// partition 0, each after the previous one's callback, as a caller of
// ProduceSync does: every record finds the partition idle, the fast path
// (sendNow, onReply). It closes the producer and returns what each
// callback saw.
func produceOneAtATime(t *testing.T, p *Producer, count int) map[string]produced {
	t.Helper()
	out := map[string]produced{}
	ctx := context.Background()
	done := make(chan produced, 1)
	for i := range count {
		v := fmt.Sprintf("v%d", i)
		p.Produce(ctx, &Record{Value: []byte(v)}, func(r *Record, err error) {
			done <- produced{value: v, partition: r.Partition, offset: r.Offset, err: err}
		})
		out[v] = <-done
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return out
}

// TestProducerOneAtATimeAllFaults is TestProducerAllFaults for a caller
// that waits for each record: the batches go out from Produce's goroutine
// and from the stream's reply callback, and still every fault is
// recovered from — a hung request times out, though it was sent while the
// sender's goroutine slept — with each record written at most once, in
// order, and acknowledged ones exactly once.
func TestProducerOneAtATimeAllFaults(t *testing.T) {
	for seed := range uint64(*seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNode()
				n.fault = randomFaults(seed, 5, faultBusy, faultTimeoutAfter, faultBreakAfter, faultBreakBefore,
					faultInvalid, faultForgetProducer, faultHang)
				p := testProducer(t, n, 1, WithPartitioner(ManualPartitioner()))
				out := produceOneAtATime(t, p, 120)
				for _, r := range out {
					if r.err != nil && !errors.Is(r.err, ErrInvalidBatch) && !errors.Is(r.err, ErrUnknownOutcome) {
						t.Fatalf("%s failed: %v", r.value, r.err)
					}
				}
				checkLogMaybe(t, n, 1, out)
			})
		})
	}
}

// TestProducerCallbacksNeverRunInsideProduce: a callback may take a lock
// the caller of Produce holds while it calls Produce. Whichever goroutine
// sends the batch and whenever the reply comes (here: before the
// stream's Send even returns, on the goroutine that sent it), the
// callback runs after Produce has returned.
func TestProducerCallbacksNeverRunInsideProduce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		n.answerInSend = true
		p := testProducer(t, n, 1, WithPartitioner(ManualPartitioner()))
		// A lock made of a channel: synctest sees its waiters as blocked,
		// so a callback waiting for it inside Produce is a deadlock the
		// test reports.
		lock := make(chan struct{}, 1)
		called := make(chan error, 1)
		for i := range 50 {
			lock <- struct{}{}
			p.Produce(context.Background(), &Record{Value: []byte(fmt.Sprint(i))}, func(_ *Record, err error) {
				lock <- struct{}{}
				<-lock
				called <- err
			})
			// Let the reply arrive and its callback start, if it would
			// start here, while the caller still holds the lock.
			synctest.Wait()
			<-lock
			if err := <-called; err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
