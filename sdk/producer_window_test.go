package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// windowNode is a fakeNode whose replies come a millisecond after their
// request, in order, so that a producer fills its in-flight window; it
// records the batch bytes on the wire at each moment, and the records
// of every batch.
type windowNode struct {
	*fakeNode
	maxFrame int

	mu       sync.Mutex
	inflight int   // batch bytes sent and not answered
	peak     int   // the most inflight ever was
	counts   []int // records per batch, in sending order
}

func newWindowNode() *windowNode { return &windowNode{fakeNode: newFakeNode(), maxFrame: 8 << 20} }

func (w *windowNode) openStream(ctx context.Context, depth int) (requestStream, int, error) {
	st, _, err := w.fakeNode.openStream(ctx, depth)
	if err != nil {
		return nil, 0, err
	}
	ws := &windowStream{requestStream: st, w: w, wake: make(chan struct{}, 1), ended: make(chan struct{})}
	go ws.deliver()
	return ws, w.maxFrame, nil
}

type windowStream struct {
	requestStream
	w *windowNode

	mu     sync.Mutex
	queue  []func() // replies to hand over, in order
	closed bool
	wake   chan struct{}
	ended  chan struct{}
}

func (s *windowStream) Send(ctx context.Context, frame []byte, cb func([]byte, error)) error {
	f, err := parseTestFrame(frame)
	if err != nil {
		return err
	}
	var req wire.ProduceRequest
	if err := wire.DecodeRequest(f, &req); err != nil {
		return err
	}
	h, err := record.ParseBatchHeader(req.Batch)
	if err != nil {
		return err
	}
	n := len(req.Batch)
	s.w.mu.Lock()
	s.w.inflight += n
	s.w.peak = max(s.w.peak, s.w.inflight)
	s.w.counts = append(s.w.counts, int(h.RecordCount))
	s.w.mu.Unlock()
	err = s.requestStream.Send(ctx, frame, func(raw []byte, err error) {
		s.push(func() {
			s.w.mu.Lock()
			s.w.inflight -= n
			s.w.mu.Unlock()
			cb(raw, err)
		})
	})
	if err != nil {
		s.w.mu.Lock()
		s.w.inflight -= n
		s.w.mu.Unlock()
	}
	return err
}

func (s *windowStream) push(r func()) {
	s.mu.Lock()
	s.queue = append(s.queue, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// deliver hands the replies over in order, each a millisecond late,
// until the stream is closed and nothing is left.
func (s *windowStream) deliver() {
	defer close(s.ended)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			<-s.wake
			continue
		}
		r := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		r()
	}
}

// Close closes the fake stream, whose unanswered requests fail at once,
// and waits until their replies are handed over.
func (s *windowStream) Close(ctx context.Context) error {
	err := s.requestStream.Close(ctx)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.ended
	return err
}

// produceValues produces one record per value, in order, to partition
// 0, closes the producer and returns each callback's outcome by value.
func produceValues(t *testing.T, p *Producer, values []string) map[string]produced {
	t.Helper()
	var mu sync.Mutex
	out := map[string]produced{}
	ctx := context.Background()
	for _, v := range values {
		p.Produce(ctx, &Record{Value: []byte(v)}, func(r *Record, err error) {
			mu.Lock()
			out[v] = produced{value: v, partition: r.Partition, offset: r.Offset, err: err}
			mu.Unlock()
		})
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if len(out) != len(values) {
		t.Fatalf("%d callbacks for %d records", len(out), len(values))
	}
	return out
}

// bigValues are n values of size bytes, each starting with its number
// ("v7xxxx…") as checkLog expects.
func bigValues(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		v := fmt.Sprintf("v%d", i)
		out[i] = v + strings.Repeat("x", size-len(v))
	}
	return out
}

func windowProducer(t *testing.T, w *windowNode, opts ...ProducerOption) *Producer {
	t.Helper()
	info := TopicInfo{Name: "t", Config: TopicConfig{Partitions: 1, MaxBatchBytes: 4 << 20}}
	p, err := newProducer(context.Background(), w, slog.New(slog.DiscardHandler), info, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProducerHoldsNoMoreThanItsByteWindow: with 64 KiB records, batches
// of one record and a window of 256 KiB, the producer keeps three
// batches on the wire at a time — never a fourth, whatever its record
// window allows — and every record is written once, in order.
func TestProducerHoldsNoMoreThanItsByteWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWindowNode()
		const window = 256 << 10
		p := windowProducer(t, w, WithMaxBatchBytes(128<<10), WithMaxInFlight(500), WithMaxInFlightBytes(window))
		out := produceValues(t, p, bigValues(100, 64<<10))
		for _, r := range out {
			if r.err != nil {
				t.Fatalf("%.8s… failed: %v", r.value, r.err)
			}
		}
		checkLog(t, w.fakeNode, 1, out)
		if w.peak > window {
			t.Fatalf("%d bytes in flight at the peak, above the window of %d", w.peak, window)
		}
		if w.peak < 3*(64<<10) {
			t.Fatalf("%d bytes in flight at the peak: the window of %d was not used", w.peak, window)
		}
	})
}

// TestProducerDefaultByteWindowBoundsBigRecords: by default a producer
// of 2 MiB records (each alone in its batch) holds at most
// DefaultMaxInFlightBytes on the wire, though its record window (500)
// and its batch window (8) would allow 16 MiB.
func TestProducerDefaultByteWindowBoundsBigRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWindowNode()
		p := windowProducer(t, w)
		out := produceValues(t, p, bigValues(24, 2<<20))
		checkLog(t, w.fakeNode, 1, out)
		if w.peak > DefaultMaxInFlightBytes {
			t.Fatalf("%d bytes in flight at the peak, above the default window of %d", w.peak, DefaultMaxInFlightBytes)
		}
	})
}

// TestProducerRecordLargerThanABatchGoesAlone: a 1 MiB record is larger
// than a default batch (1 MiB, header included) but within the topic's
// 4 MiB: it goes in a batch of its own, between the batches of the small
// records around it, in order. One larger than the topic's limit fails
// alone with ErrMessageTooLarge.
func TestProducerRecordLargerThanABatchGoesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWindowNode()
		p := windowProducer(t, w)
		values := bigValues(6, 100)
		values[2] = bigValues(3, 1<<20)[2]
		tooBig := bigValues(1, 5<<20)[0]
		var tooBigErr error
		p.Produce(context.Background(), &Record{Value: []byte(tooBig)}, func(_ *Record, err error) { tooBigErr = err })
		if !errors.Is(tooBigErr, ErrMessageTooLarge) {
			t.Fatalf("a 5 MiB record: %v, want ErrMessageTooLarge", tooBigErr)
		}
		out := produceValues(t, p, values)
		for _, r := range out {
			if r.err != nil {
				t.Fatalf("%.8s… failed: %v", r.value, r.err)
			}
		}
		checkLog(t, w.fakeNode, 1, out)
		var alone bool
		for i, c := range w.counts {
			if c == 1 && i > 0 {
				alone = true
			}
		}
		if !alone || len(w.counts) < 3 {
			t.Fatalf("batches of %v records: want the 1 MiB record in a batch of its own between the others", w.counts)
		}
	})
}

// TestProducerByteWindowKeepsExactlyOnce: under a byte window smaller
// than a few batches, busy answers, timeouts after an append and broken
// streams still write every record exactly once, in order.
func TestProducerByteWindowKeepsExactlyOnce(t *testing.T) {
	for seed := range uint64(*seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 36))
				w := newWindowNode()
				w.fault = randomFaults(seed, 8, faultBusy, faultTimeoutAfter, faultBreakAfter, faultBreakBefore)
				p := windowProducer(t, w, WithMaxBatchBytes(8<<10+rng.IntN(32<<10)), WithMaxInFlightBytes(64<<10+rng.IntN(128<<10)))
				out := produceValues(t, p, bigValues(150, 1+rng.IntN(8<<10)+8))
				for _, r := range out {
					if r.err != nil {
						t.Fatalf("%.8s… failed: %v", r.value, r.err)
					}
				}
				checkLog(t, w.fakeNode, 1, out)
			})
		})
	}
}
