package e2e

import (
	"fmt"
	"math"
	"runtime/metrics"
	"time"
)

// runtimeFigures are the Go runtime's counters that explain a latency:
// garbage collections, the stop-the-world pauses (and the time to stop
// every P, which a thread the kernel does not run can hold up), and how
// long runnable goroutines waited for a P.
type runtimeFigures struct {
	gcs       uint64
	pauses    *metrics.Float64Histogram // every stop-the-world, whole
	stopping  *metrics.Float64Histogram // getting every P to stop
	schedWait *metrics.Float64Histogram // runnable to running
}

var runtimeSamples = []string{
	"/gc/cycles/total:gc-cycles",
	"/sched/pauses/total/gc:seconds",
	"/sched/pauses/stopping/gc:seconds",
	"/sched/latencies:seconds",
}

func readRuntimeFigures() runtimeFigures {
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, name := range runtimeSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	return runtimeFigures{
		gcs:       s[0].Value.Uint64(),
		pauses:    s[1].Value.Float64Histogram(),
		stopping:  s[2].Value.Float64Histogram(),
		schedWait: s[3].Value.Float64Histogram(),
	}
}

// since returns the figures of what happened between earlier and f.
func (f runtimeFigures) since(earlier runtimeFigures) runtimeFigures {
	return runtimeFigures{
		gcs:       f.gcs - earlier.gcs,
		pauses:    histogramSince(f.pauses, earlier.pauses),
		stopping:  histogramSince(f.stopping, earlier.stopping),
		schedWait: histogramSince(f.schedWait, earlier.schedWait),
	}
}

func (f runtimeFigures) String() string {
	return fmt.Sprintf("%d GCs, longest stop-the-world %v (stopping %v); goroutines waited for a P: p99 %v, max %v",
		f.gcs, seconds(quantile(f.pauses, 1)), seconds(quantile(f.stopping, 1)),
		seconds(quantile(f.schedWait, 0.99)), seconds(quantile(f.schedWait, 1)))
}

func histogramSince(h, earlier *metrics.Float64Histogram) *metrics.Float64Histogram {
	d := &metrics.Float64Histogram{Buckets: h.Buckets, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Counts {
		d.Counts[i] = h.Counts[i] - earlier.Counts[i]
	}
	return d
}

// quantile returns the upper bound of the bucket holding quantile q of h
// (q = 1: the largest sample's), or 0 for an empty histogram.
func quantile(h *metrics.Float64Histogram, q float64) float64 {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= rank && c > 0 {
			up := h.Buckets[i+1]
			if math.IsInf(up, 1) {
				up = h.Buckets[i]
			}
			return up
		}
	}
	return 0
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond)
}
