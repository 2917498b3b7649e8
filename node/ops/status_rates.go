package ops

import (
	"sync"
	"time"
)

// rateWindow is how far back throughput is measured, and rateSpacing the
// least time between two kept samples.
const (
	rateWindow  = 10 * time.Second
	rateSpacing = time.Second
)

// rateKey names a partition of one topic creation.
type rateKey struct {
	topic     string
	id        [16]byte
	partition uint32
}

// rateSample is a partition's counters at one moment.
type rateSample struct {
	at      time.Time
	records uint64 // high watermark: every offset handed out counts
	bytes   uint64 // appended bytes
}

// rates turns samples of monotone counters into per-second rates over
// the last rateWindow. Safe for concurrent use.
type rates struct {
	mu      sync.Mutex
	samples map[rateKey][]rateSample
}

func newRates() *rates { return &rates{samples: map[rateKey][]rateSample{}} }

// observe adds a sample and returns the rates since the oldest sample
// kept (0, 0 until one is at least rateSpacing old).
func (r *rates) observe(k rateKey, s rateSample) (recordsPerSec, bytesPerSec float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ss := r.samples[k]
	// Drop what fell out of the window, keeping one sample to measure
	// from.
	for len(ss) > 1 && s.at.Sub(ss[1].at) >= rateWindow {
		ss = ss[1:]
	}
	if n := len(ss); n == 0 || s.at.Sub(ss[n-1].at) >= rateSpacing {
		ss = append(ss, s)
	}
	r.samples[k] = ss
	first := ss[0]
	dt := s.at.Sub(first.at).Seconds()
	if dt <= 0 || s.records < first.records || s.bytes < first.bytes {
		return 0, 0
	}
	return float64(s.records-first.records) / dt, float64(s.bytes-first.bytes) / dt
}

// keep forgets every partition not in live (deleted topics).
func (r *rates) keep(live map[rateKey]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.samples {
		if !live[k] {
			delete(r.samples, k)
		}
	}
}
