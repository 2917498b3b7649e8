package session

import (
	"context"
	"fmt"
	"math"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// Overload: a node past what it can serve answers "busy, retry after"
// instead of queueing without end. Queueing without end is how a node on
// one CPU collapsed: requests waited seconds, devices retransmitted what
// they took for losses, and the retransmissions kept the node saturated
// long after the burst (docs/OPERATIONS.md, "Overload").
//
// The Shedder admits the produce requests of the node's listeners (the
// load a fleet brings) against three things:
//
//   - a bound of produce requests in flight node-wide (read, not yet
//     answered: waiting for the owner, for durability, for the reply's
//     turn on its stream), and one of their bytes;
//   - the node's queueing delay, CoDel-like: when it has stayed above a
//     target for an interval, a share of new produce requests is shed,
//     growing each interval it stays above and shrinking once it is
//     below, so that what is accepted keeps a bounded latency.
//
// A shed request changes nothing and is answered StatusBusy with a
// retry-after; clients wait that long (with jitter) before sending again,
// and a producer shrinks its window meanwhile, so the load falls instead
// of growing. Other requests (polls, commits, heartbeats, admin) are
// never shed here: they are few, polls have their own bound (parked
// polls), and shedding a heartbeat or a commit costs more than it saves.
//
// The queueing delay is the largest of three waits. The time the node's
// runnable goroutines wait for a processor (the Go scheduler's latency,
// from runtime/metrics): every request crosses a few goroutines, and
// past the CPU that wait grows. How late the node's own measuring timer
// wakes: a node the operating system starves (a machine shared with
// other work) shows there, not in the scheduler's latency. And the
// wait ahead of the node's goroutines, given to Run as DelaySources:
// the transport's, how long datagrams waited in the UDP socket's
// receive buffer before the node read them. Past the CPU on a fleet of
// devices, that last one is where the queue stands: the QUIC stack's
// per-datagram work falls behind, datagrams wait in the kernel, the
// devices retransmit what they take for losses, and the node's own
// goroutines see no delay large enough to shed. Run samples them all;
// ObserveDelay is the controller's input, so that tests drive it with
// the values they choose.

// Defaults of ShedConfig.
const (
	DefaultShedMaxRequests  = 4096
	DefaultShedMaxBytes     = 32 << 20
	DefaultShedDelayTarget  = 100 * time.Millisecond
	DefaultShedInterval     = 100 * time.Millisecond
	DefaultShedRetryAfter   = 500 * time.Millisecond
	delaySamplesPerInterval = 2
	// The shed share is counted in tenths, and moves a tenth per
	// measurement: from none to the most in nine measurements above the
	// target, and back to none within nine below it.
	shedTenths = 10
	// maxShedTenths leaves a tenth of the produce requests through even
	// while shedding, so the node keeps measuring what it accepts.
	maxShedTenths = 9
	// maxDelayRetryAfter caps the hint derived from the queueing delay.
	maxDelayRetryAfter = 10 * time.Second
	// delayQuantile is the quantile of an interval's scheduling waits
	// taken as its queueing delay: the median, so that a few slow wakes
	// (a collection's assist) do not count as a queue.
	delayQuantile = 0.5
)

// ShedConfig bounds the produce requests a node holds.
type ShedConfig struct {
	// MaxRequests bounds the produce requests in flight node-wide;
	// past it a produce is answered busy. Default 4096; negative: no
	// bound.
	MaxRequests int
	// MaxBytes bounds their frames' bytes; past it a produce is answered
	// busy (one alone is always admitted). Default 32 MiB, half of the
	// transport's in-flight budget, so that the node answers busy before
	// it stops reading; negative: no bound.
	MaxBytes int64
	// DelayTarget is the queueing delay above which the node starts
	// shedding once it has stayed above it for Interval. Default 100 ms;
	// negative: never shed on delay.
	DelayTarget time.Duration
	// Interval is how long the delay must stay above the target before
	// the shed share grows, and how often Run measures it (twice an
	// interval). Default 100 ms.
	Interval time.Duration
	// SocketWait makes the node shed on the UDP socket's wait too (a
	// DelaySource the node hands Run; Linux only). Default off: on a
	// fleet past the node's CPU, on a machine shared with other work,
	// shedding on it answered nine produce requests in ten busy, each
	// retry was shed as often, and the records acknowledged fell 8 to 12
	// times (bench/README.md, "The fleet past the CPU").
	SocketWait bool
	// RetryAfter is the least retry-after a busy answer hints; an answer
	// shed on delay hints twice the delay measured, up to 10 s. Default
	// 500 ms.
	RetryAfter time.Duration
	// Now is the clock of the delay's intervals. Default time.Now.
	Now func() time.Time
	// Metrics receives the delay measured and every request shed
	// (optional).
	Metrics ShedMetrics
}

// ShedMetrics is what the Shedder reports.
type ShedMetrics interface {
	// QueueDelay is called with each measure of the queueing delay.
	QueueDelay(d time.Duration)
	// Shed is called for each request answered busy, with the reason
	// (ShedReason.String).
	Shed(reason string)
}

func (c ShedConfig) withDefaults() ShedConfig {
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultShedMaxRequests
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultShedMaxBytes
	}
	if c.DelayTarget == 0 {
		c.DelayTarget = DefaultShedDelayTarget
	}
	if c.Interval <= 0 {
		c.Interval = DefaultShedInterval
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultShedRetryAfter
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// ShedReason says why a request was shed.
type ShedReason uint8

// Reasons.
const (
	ShedRequests ShedReason = iota + 1 // MaxRequests in flight
	ShedBytes                          // MaxBytes in flight
	ShedDelay                          // the queueing delay stayed above its target
)

// String names the reason, as the metrics label it.
func (r ShedReason) String() string {
	switch r {
	case ShedRequests:
		return "requests"
	case ShedBytes:
		return "bytes"
	case ShedDelay:
		return "delay"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// BusyError is a request shed: nothing happened. It matches ErrBusy.
type BusyError struct {
	Reason ShedReason
	// RetryAfter is how long the client should wait before sending again.
	RetryAfter time.Duration
	msg        string
}

func (e *BusyError) Error() string { return "node: busy: " + e.msg }

// Is matches ErrBusy.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Shedder admits produce requests against the node's bounds and its
// queueing delay. Its methods are safe for concurrent use.
type Shedder struct {
	cfg ShedConfig

	mu       sync.Mutex
	requests int   // admitted and not released
	bytes    int64 // their bytes
	// The delay's control: aboveSince is when the delay went above the
	// target (zero while below); share is the tenths of new produce
	// requests shed, and credit accumulates it so that exactly that part
	// is shed, without randomness.
	delay      time.Duration
	aboveSince time.Time
	share      int
	credit     int
	shed       [ShedDelay + 1]uint64
	// The delay's parts last measured by Run, and their names.
	parts     []time.Duration
	partNames []string
}

// NewShedder returns a Shedder with cfg's bounds (zero fields take the
// defaults).
func NewShedder(cfg ShedConfig) *Shedder { return &Shedder{cfg: cfg.withDefaults()} }

// Admit takes a place for a produce request of n bytes, or returns why
// it is shed when the node is at a bound or sheds on delay. A place taken
// is given back with Release(n) once the request is answered.
func (s *Shedder) Admit(n int) *BusyError {
	s.mu.Lock()
	var reason ShedReason
	switch {
	case s.cfg.MaxRequests > 0 && s.requests >= s.cfg.MaxRequests:
		reason = ShedRequests
	case s.cfg.MaxBytes > 0 && s.requests > 0 && s.bytes+int64(n) > s.cfg.MaxBytes:
		reason = ShedBytes
	case s.share > 0:
		if s.credit += s.share; s.credit >= shedTenths {
			s.credit -= shedTenths
			reason = ShedDelay
		}
	}
	if reason == 0 {
		s.requests++
		s.bytes += int64(n)
		s.mu.Unlock()
		return nil
	}
	s.shed[reason]++
	err := &BusyError{Reason: reason, RetryAfter: s.cfg.RetryAfter}
	switch reason {
	case ShedRequests:
		err.msg = fmt.Sprintf("%d produce requests in flight; retry after %v", s.requests, err.RetryAfter)
	case ShedBytes:
		err.msg = fmt.Sprintf("%d bytes of produce requests in flight; retry after %v", s.bytes, err.RetryAfter)
	case ShedDelay:
		err.RetryAfter = min(max(err.RetryAfter, 2*s.delay), maxDelayRetryAfter)
		err.msg = fmt.Sprintf("queueing delay %v past its target of %v, shedding %d%% of produce requests; retry after %v",
			s.delay.Round(time.Millisecond), s.cfg.DelayTarget, 100*s.share/shedTenths, err.RetryAfter)
	}
	s.mu.Unlock()
	if m := s.cfg.Metrics; m != nil {
		m.Shed(reason.String())
	}
	return err
}

// Release gives back the place of an admitted request of n bytes.
func (s *Shedder) Release(n int) {
	s.mu.Lock()
	s.requests--
	s.bytes -= int64(n)
	if s.requests < 0 || s.bytes < 0 {
		s.mu.Unlock()
		panic("session: shedder released more than it admitted")
	}
	s.mu.Unlock()
}

// ObserveDelay feeds the controller one measure of the queueing delay.
// Once measures at or above the target have lasted an interval, each
// further one raises the share of produce requests shed; each measure
// below it lowers the share.
func (s *Shedder) ObserveDelay(d time.Duration) {
	if m := s.cfg.Metrics; m != nil {
		m.QueueDelay(d)
	}
	if s.cfg.DelayTarget < 0 {
		return
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
	switch {
	case d < s.cfg.DelayTarget:
		s.aboveSince = time.Time{}
		if s.share = max(0, s.share-1); s.share == 0 {
			s.credit = 0
		}
	case s.aboveSince.IsZero():
		s.aboveSince = now
	case now.Sub(s.aboveSince) >= s.cfg.Interval:
		s.share = min(maxShedTenths, s.share+1)
	}
}

// ShedStats is what a Shedder holds and has shed.
type ShedStats struct {
	Requests int           // produce requests in flight
	Bytes    int64         // their bytes
	Delay    time.Duration // the last queueing delay measured: the largest of Delays
	// Delays is the last measure of each of the delay's parts, by name:
	// "scheduler", "timer", and each DelaySource's. Empty before Run
	// has measured.
	Delays map[string]time.Duration
	Share  float64 // the part of new produce requests shed on delay
	Shed   map[string]uint64
}

// Stats returns what s holds and has shed, by reason.
func (s *Shedder) Stats() ShedStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ShedStats{Requests: s.requests, Bytes: s.bytes, Delay: s.delay, Share: float64(s.share) / shedTenths,
		Delays: map[string]time.Duration{}, Shed: map[string]uint64{}}
	for i, p := range s.parts {
		st.Delays[s.partNames[i]] = p
	}
	for r := ShedRequests; r <= ShedDelay; r++ {
		st.Shed[r.String()] = s.shed[r]
	}
	return st
}

// DelaySource is a further part of the queueing delay that Run measures:
// a wait ahead of the node's goroutines, such as the time datagrams wait
// in the UDP socket before the node reads them (the QUIC listener's
// ReceiveQueueDelay).
type DelaySource struct {
	// Name labels the part in ShedStats.Delays.
	Name string
	// Measure returns the wait since its previous call. Run calls it
	// from one goroutine, twice an interval; it must not block.
	Measure func() time.Duration
}

// Run measures the queueing delay twice an interval until ctx ends: the
// median wait of the goroutines scheduled since the last measure, how
// late this measure woke, or what each of sources measured, whichever is
// largest.
func (s *Shedder) Run(ctx context.Context, sources ...DelaySource) {
	period := s.cfg.Interval / delaySamplesPerInterval
	t := time.NewTicker(period)
	defer t.Stop()
	var sched schedLatency
	sched.read() // the baseline
	names := []string{"scheduler", "timer"}
	for _, src := range sources {
		names = append(names, src.Name)
	}
	parts := make([]time.Duration, len(names))
	s.mu.Lock()
	s.partNames = names
	s.mu.Unlock()
	prev := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := time.Now()
			parts[0] = sched.read()
			parts[1] = max(now.Sub(prev)-period, 0)
			prev = now
			for i, src := range sources {
				parts[2+i] = src.Measure()
			}
			s.observeParts(parts)
		}
	}
}

// observeParts keeps the delay's parts for Stats and observes the
// largest.
func (s *Shedder) observeParts(parts []time.Duration) {
	d := time.Duration(0)
	s.mu.Lock()
	if len(s.parts) != len(parts) {
		s.parts = make([]time.Duration, len(parts))
	}
	copy(s.parts, parts)
	for _, p := range parts {
		d = max(d, p)
	}
	s.mu.Unlock()
	s.ObserveDelay(d)
}

// schedLatency reads the Go scheduler's latency histogram and returns the
// quantile of the waits since the previous read.
type schedLatency struct {
	sample [1]metrics.Sample
	prev   []uint64
}

const schedLatencyMetric = "/sched/latencies:seconds"

func (l *schedLatency) read() time.Duration {
	l.sample[0].Name = schedLatencyMetric
	metrics.Read(l.sample[:])
	if l.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := l.sample[0].Value.Float64Histogram()
	if len(l.prev) != len(h.Counts) {
		l.prev = make([]uint64, len(h.Counts))
		copy(l.prev, h.Counts)
		return 0
	}
	var total uint64
	for i, c := range h.Counts {
		total += c - l.prev[i]
	}
	d := time.Duration(0)
	if total > 0 {
		want := uint64(math.Ceil(delayQuantile * float64(total)))
		var seen uint64
		for i, c := range h.Counts {
			if seen += c - l.prev[i]; seen >= want {
				if lo := h.Buckets[i]; lo > 0 && !math.IsInf(lo, 0) {
					d = time.Duration(lo * float64(time.Second))
				}
				break
			}
		}
	}
	copy(l.prev, h.Counts)
	return d
}

// SetClientFlags records what the session's client announced it reads
// (its Authenticate flags).
func (s *Session) SetClientFlags(f wire.AuthFlags) { s.flags = f }

// ReadsRetryAfter reports whether the client reads a busy reply's
// retry-after (wire.AppendBusyReply).
func (s *Session) ReadsRetryAfter() bool { return s.flags&wire.AuthReadsRetryAfter != 0 }

// BusyReply is the reply to request h that e sheds: with its retry-after
// when the session's client reads one, else a plain busy reply.
func (s *Session) BusyReply(h wire.FrameHeader, e *BusyError) []byte {
	if s.ReadsRetryAfter() {
		return wire.AppendBusyReply(nil, h, e.Error(), e.RetryAfter)
	}
	return wire.AppendErrorReply(nil, h, wire.StatusBusy, e.Error())
}
