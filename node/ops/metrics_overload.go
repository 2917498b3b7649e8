package ops

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// overloadMetrics are the node's shedding under overload
// (docs/OPERATIONS.md, "Overload").
type overloadMetrics struct {
	queueDelay prometheus.Histogram
	shed       *prometheus.CounterVec
}

func newOverloadMetrics() overloadMetrics {
	return overloadMetrics{
		queueDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ledge_queue_delay_seconds",
			Help:    "The node's queueing delay, measured twice every 100 ms: the median time its runnable goroutines waited for a processor, or how late the measure itself woke, whichever is larger. Past its target (100 ms) for an interval, the node sheds produce requests.",
			Buckets: requestBuckets(),
		}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ledge_requests_shed_total",
			Help: "Produce requests answered busy without being served, by reason: requests or bytes (a bound of those in flight reached), delay (the queueing delay past its target).",
		}, []string{"reason"}),
	}
}

func (o overloadMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.queueDelay, o.shed}
}

// QueueDelay implements session.ShedMetrics.
func (m *PromMetrics) QueueDelay(d time.Duration) { m.overload.queueDelay.Observe(d.Seconds()) }

// Shed implements session.ShedMetrics.
func (m *PromMetrics) Shed(reason string) { m.overload.shed.WithLabelValues(reason).Inc() }
