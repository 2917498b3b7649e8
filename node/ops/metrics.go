package ops

import (
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// PromMetrics is the node's Prometheus registry: the counters and
// histograms the request path feeds (Metrics), fsync timings (WrapFS),
// and collectors that read the attached node's state at scrape time
// (Attach). docs/OPERATIONS.md lists every metric.
type PromMetrics struct {
	reg *prometheus.Registry

	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	fenced    *prometheus.CounterVec
	fsyncs    *prometheus.HistogramVec
	fsyncFail *prometheus.CounterVec
	overload  overloadMetrics

	mu    sync.RWMutex
	parts map[partitionKey]*partitionCounters

	ref     nodeRef
	ready   func() (bool, string) // set by the HTTP server: readiness for ledge_ready
	readyMu sync.Mutex
}

// nodeRef is the node the scrape-time collectors and the status page read.
// Detaching waits for the reads in progress, so that none of them runs
// while the node closes its storage.
type nodeRef struct {
	mu      sync.RWMutex
	n       Source
	groups  GroupDescriber
	plugins PluginLister
}

// setPlugins sets the plugin host read along with the node.
func (r *nodeRef) setPlugins(p PluginLister) {
	r.mu.Lock()
	r.plugins = p
	r.mu.Unlock()
}

// setGroups sets the group coordinator read along with the node.
func (r *nodeRef) setGroups(g GroupDescriber) {
	r.mu.Lock()
	r.groups = g
	r.mu.Unlock()
}

func (r *nodeRef) set(n Source) {
	r.mu.Lock()
	r.n = n
	if n == nil {
		r.groups, r.plugins = nil, nil
	}
	r.mu.Unlock()
}

// with runs fn on the attached node, holding it attached meanwhile; it
// reports false when no node is attached.
func (r *nodeRef) with(fn func(Source)) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.n == nil {
		return false
	}
	fn(r.n)
	return true
}

// partitionKey names a partition by topic name: a topic re-created under
// the same name continues its counters (a counter never goes down).
type partitionKey struct {
	topic     string
	partition uint32
}

// partitionCounters are the per-partition counters of the request path.
type partitionCounters struct {
	deliveredBytes atomic.Uint64
}

// Buckets of the latency histograms, in seconds: from 100µs (an append
// with durability none) to a minute (long polls that waited).
func requestBuckets() []float64 {
	return []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
}

func fsyncBuckets() []float64 {
	return []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}
}

// NewPromMetrics returns a registry with the node's metrics, the Go
// runtime's and the process's (resident memory, open files, CPU).
func NewPromMetrics(version string) *PromMetrics {
	m := &PromMetrics{
		reg:   prometheus.NewRegistry(),
		parts: map[partitionKey]*partitionCounters{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ledge_requests_total",
			Help: "Requests answered, by request kind and reply status.",
		}, []string{"kind", "status"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ledge_request_duration_seconds",
			Help:    "Time from the start of a request's handling to its reply being ready, by request kind (produce: until durable per the topic's policy; poll: including a long poll's wait).",
			Buckets: requestBuckets(),
		}, []string{"kind"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ledge_fence_rejections_total",
			Help: "Work refused by a fence check, by request kind and fence code.",
		}, []string{"kind", "code"}),
		fsyncs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ledge_fsync_duration_seconds",
			Help:    "Duration of fsync calls on the data directory (log segments, metadata, directories), by target.",
			Buckets: fsyncBuckets(),
		}, []string{"target"}),
		fsyncFail: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ledge_fsync_failures_total",
			Help: "Failed fsync calls, by target. A failed fsync of a log fails its partition until restart.",
		}, []string{"target"}),
	}
	m.overload = newOverloadMetrics()
	m.reg.MustRegister(m.overload.collectors()...)
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ledge_build_info",
		Help: "Always 1; the labels say which build is running.",
	}, []string{"version", "goversion"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	m.reg.MustRegister(
		m.requests, m.durations, m.fenced, m.fsyncs, m.fsyncFail, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&stateCollector{m: m, d: newStateDescs()},
		&uplinkCollector{m: m, d: newUplinkDescs()},
		&downlinkCollector{m: m, d: newDownlinkDescs()},
	)
	return m
}

// Registry returns the registry, to register more collectors (plugins).
func (m *PromMetrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *PromMetrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Attach makes the scrape-time collectors report n's state. Before it,
// only the counters, the runtime and the process are reported.
func (m *PromMetrics) Attach(n Source) { m.ref.set(n) }

// Detach stops reading the node, once the reads in progress are done.
// Call it before closing the node.
func (m *PromMetrics) Detach() { m.ref.set(nil) }

// setReadiness makes ledge_ready report ready().
func (m *PromMetrics) setReadiness(ready func() (bool, string)) {
	m.readyMu.Lock()
	m.ready = ready
	m.readyMu.Unlock()
}

func (m *PromMetrics) readiness() (bool, bool, string) {
	m.readyMu.Lock()
	f := m.ready
	m.readyMu.Unlock()
	if f == nil {
		return false, false, ""
	}
	ok, reason := f()
	return true, ok, reason
}

// RequestDone implements Metrics.
func (m *PromMetrics) RequestDone(kind wire.Kind, status wire.Status, d time.Duration) {
	k := kind.String()
	m.requests.WithLabelValues(k, labelOf(status.String())).Inc()
	m.durations.WithLabelValues(k).Observe(d.Seconds())
}

// Delivered implements Metrics.
func (m *PromMetrics) Delivered(topic string, partition uint32, bytes int) {
	m.counters(topic, partition).deliveredBytes.Add(uint64(bytes))
}

// FenceRejected implements Metrics.
func (m *PromMetrics) FenceRejected(kind wire.Kind, code fence.Code) {
	m.fenced.WithLabelValues(kind.String(), labelOf(code.String())).Inc()
}

// counters returns the partition's counters, creating them on first use.
func (m *PromMetrics) counters(topic string, partition uint32) *partitionCounters {
	k := partitionKey{topic, partition}
	m.mu.RLock()
	c := m.parts[k]
	m.mu.RUnlock()
	if c != nil {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c = m.parts[k]; c == nil {
		c = &partitionCounters{}
		m.parts[k] = c
	}
	return c
}

// deliveredBytes returns the bytes polls returned from a partition.
func (m *PromMetrics) deliveredBytes(topic string, partition uint32) uint64 {
	m.mu.RLock()
	c := m.parts[partitionKey{topic, partition}]
	m.mu.RUnlock()
	if c == nil {
		return 0
	}
	return c.deliveredBytes.Load()
}

// observeFsync records one fsync.
func (m *PromMetrics) observeFsync(target string, d time.Duration, err error) {
	m.fsyncs.WithLabelValues(target).Observe(d.Seconds())
	if err != nil {
		m.fsyncFail.WithLabelValues(target).Inc()
	}
}

// labelOf turns a name with spaces and dashes into a label value:
// "stale history" → "stale_history".
func labelOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}
