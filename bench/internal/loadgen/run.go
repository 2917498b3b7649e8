package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Params are a workload's pinned parameters.
type Params struct {
	Size     int           // payload bytes per message
	Window   int           // messages in flight per producer
	Warmup   time.Duration // unrecorded lead-in, drained before measuring
	Duration time.Duration // measured phase, when Count is 0
	Count    int64         // messages per producer in the measured phase, when > 0
	Rate     float64       // open loop: messages per second
	Seed     uint64        // payload seed
	// Tags, when > 0, makes the payloads JSON documents naming one of Tags
	// tags in turn (NewTaggedPayloads), sent with SendTagged.
	Tags int
}

// Hooks mark the measured phase, so that the caller samples the server
// right around it. Either may be nil.
type Hooks struct {
	Begin func()
	End   func()
}

func (h Hooks) begin() {
	if h.Begin != nil {
		h.Begin()
	}
}

func (h Hooks) end() {
	if h.End != nil {
		h.End()
	}
}

// Result is what a measured phase achieved.
type Result struct {
	Msgs     int64
	Bytes    int64 // payload bytes
	Elapsed  time.Duration
	Hist     *hdrhistogram.Histogram // microseconds; nil for replay
	Errors   int64
	FirstErr error
}

// MsgsPerSec is the measured message rate.
func (r Result) MsgsPerSec() float64 { return float64(r.Msgs) / r.Elapsed.Seconds() }

// MBPerSec is the measured payload rate in MB/s (10^6 bytes).
func (r Result) MBPerSec() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// Percentile returns the latency at q (0-100) in microseconds, or 0
// without a histogram.
func (r Result) Percentile(q float64) int64 {
	if r.Hist == nil || r.Hist.TotalCount() == 0 {
		return 0
	}
	return r.Hist.ValueAtQuantile(q)
}

// maxErrors stops a workload that only fails.
const maxErrors = 1000

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 120_000_000, 3) }

// recorder collects the outcomes of one phase, from any goroutine.
type recorder struct {
	mu       sync.Mutex
	hist     *hdrhistogram.Histogram
	msgs     atomic.Int64
	bytes    atomic.Int64
	errs     atomic.Int64
	firstErr error
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

func newRecorder(cancel context.CancelFunc) *recorder {
	return &recorder{hist: newHist(), cancel: cancel}
}

func (r *recorder) done(from time.Time, size int, err error) {
	now := time.Now()
	if err != nil {
		r.mu.Lock()
		if r.firstErr == nil {
			r.firstErr = err
		}
		r.mu.Unlock()
		if r.errs.Add(1) >= maxErrors {
			r.cancel()
		}
		return
	}
	us := max(now.Sub(from).Microseconds(), 1)
	r.mu.Lock()
	_ = r.hist.RecordValue(us)
	r.mu.Unlock()
	r.msgs.Add(1)
	r.bytes.Add(int64(size))
}

func (r *recorder) result(elapsed time.Duration) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Result{Msgs: r.msgs.Load(), Bytes: r.bytes.Load(), Elapsed: elapsed, Hist: r.hist,
		Errors: r.errs.Load(), FirstErr: r.firstErr}
}

// RunAsync runs one async producer per element of prods, each with
// p.Window messages in flight, for p.Warmup unrecorded and then p.Duration
// (or p.Count messages each) recorded; latency runs from Send to the
// acknowledgement.
func RunAsync(ctx context.Context, prods []Producer, p Params, h Hooks) (Result, error) {
	if p.Window < 1 {
		return Result{}, errors.New("loadgen: window must be positive")
	}
	pays := make([]*Payloads, len(prods))
	for i, prod := range prods {
		if p.Tags == 0 {
			pays[i] = NewPayloads(p.Seed+uint64(i), p.Size, 64)
			continue
		}
		if _, ok := prod.(TaggedProducer); !ok {
			return Result{}, fmt.Errorf("loadgen: producer %T cannot send tagged messages", prod)
		}
		if p.Size < 64 {
			return Result{}, fmt.Errorf("loadgen: tagged payloads of %d bytes: at least 64", p.Size)
		}
		pays[i] = NewTaggedPayloads(p.Seed+uint64(i), p.Size, p.Tags)
	}
	if p.Warmup > 0 {
		if _, err := asyncPhase(ctx, prods, pays, p, p.Warmup, 0); err != nil {
			return Result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	h.begin()
	defer h.end()
	return asyncPhase(ctx, prods, pays, p, p.Duration, p.Count)
}

func asyncPhase(ctx context.Context, prods []Producer, pays []*Payloads, p Params, d time.Duration, count int64) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec := newRecorder(cancel)
	start := time.Now()
	deadline := start.Add(d)
	var senders sync.WaitGroup
	for i, prod := range prods {
		senders.Add(1)
		go func() {
			defer senders.Done()
			tagged, _ := prod.(TaggedProducer) // used for tagged payloads only
			window := make(chan struct{}, p.Window)
			for n := int64(0); ; n++ {
				if count > 0 && n >= count || count == 0 && n&15 == 0 && !time.Now().Before(deadline) {
					break
				}
				select {
				case window <- struct{}{}:
				case <-ctx.Done():
					return
				}
				rec.wg.Add(1)
				from := time.Now()
				done := func(err error) {
					rec.done(from, p.Size, err)
					<-window
					rec.wg.Done()
				}
				if b, tag := pays[i].NextTagged(); tag != "" {
					tagged.SendTagged(b, tag, done)
				} else {
					prod.Send(b, done)
				}
			}
		}()
	}
	senders.Wait()
	if err := waitGroup(ctx, &rec.wg); err != nil {
		return rec.result(time.Since(start)), fmt.Errorf("loadgen: waiting for acknowledgements: %w (first send error: %v)", err, rec.firstErr)
	}
	res := rec.result(time.Since(start))
	if res.Errors >= maxErrors {
		return res, fmt.Errorf("loadgen: %d sends failed, first: %w", res.Errors, res.FirstErr)
	}
	return res, nil
}

// waitGroup waits for wg or for ctx, whichever ends first.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// RunSync sends one message at a time and waits for each
// acknowledgement: the latency of a lone request.
func RunSync(ctx context.Context, prod Producer, p Params, h Hooks) (Result, error) {
	pay := NewPayloads(p.Seed, p.Size, 64)
	phase := func(d time.Duration, rec *recorder) error {
		deadline := time.Now().Add(d)
		for n := int64(0); ; n++ {
			if p.Count > 0 && n >= p.Count || p.Count == 0 && !time.Now().Before(deadline) {
				return nil
			}
			from := time.Now()
			err := prod.SendSync(ctx, pay.Next())
			rec.done(from, p.Size, err)
			if rec.errs.Load() >= maxErrors || ctx.Err() != nil {
				return fmt.Errorf("loadgen: %d sends failed, first: %w", rec.errs.Load(), rec.firstErr)
			}
		}
	}
	if p.Warmup > 0 {
		if err := phase(p.Warmup, newRecorder(func() {})); err != nil {
			return Result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	h.begin()
	defer h.end()
	rec := newRecorder(func() {})
	start := time.Now()
	err := phase(p.Duration, rec)
	return rec.result(time.Since(start)), err
}

// RunOpenLoop sends p.Rate messages per second on a fixed schedule, with
// at most p.Window in flight; each latency runs from the message's
// scheduled send time, so a stall of the server that holds the sender
// back still shows in full.
func RunOpenLoop(ctx context.Context, prod Producer, p Params, h Hooks) (Result, error) {
	if p.Rate <= 0 {
		return Result{}, errors.New("loadgen: open loop needs a rate")
	}
	pay := NewPayloads(p.Seed, p.Size, 64)
	interval := time.Duration(float64(time.Second) / p.Rate)
	phase := func(d time.Duration) (Result, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		rec := newRecorder(cancel)
		window := make(chan struct{}, p.Window)
		start := time.Now()
		n := int64(d / interval)
	send:
		for i := int64(0); i < n; i++ {
			due := start.Add(time.Duration(i) * interval)
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				break send
			}
			rec.wg.Add(1)
			prod.Send(pay.Next(), func(err error) {
				rec.done(due, p.Size, err)
				<-window
				rec.wg.Done()
			})
		}
		if err := waitGroup(ctx, &rec.wg); err != nil {
			return rec.result(time.Since(start)), err
		}
		res := rec.result(time.Since(start))
		if res.Errors >= maxErrors {
			return res, fmt.Errorf("loadgen: %d sends failed, first: %w", res.Errors, res.FirstErr)
		}
		return res, nil
	}
	if p.Warmup > 0 {
		if _, err := phase(p.Warmup); err != nil {
			return Result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	h.begin()
	defer h.end()
	return phase(p.Duration)
}

// RunReplay reads total messages from the start of a partition as fast
// as the reader goes.
func RunReplay(ctx context.Context, r Reader, total int64, h Hooks) (Result, error) {
	h.begin()
	defer h.end()
	start := time.Now()
	var res Result
	for res.Msgs < total {
		n, b, err := r.Read(ctx)
		res.Msgs += int64(n)
		res.Bytes += b
		if err != nil {
			res.Elapsed = time.Since(start)
			return res, fmt.Errorf("loadgen: replay after %d of %d messages: %w", res.Msgs, total, err)
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}
