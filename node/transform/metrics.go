package transform

import (
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The transforms' metrics, read from the manager's status when /metrics
// is scraped: labels transform and partition (the input partition), and
// transform alone for ledge_transform_running.

// collector reports a manager's transforms.
type collector struct {
	m atomic.Pointer[Manager]

	committed, lag, in, out, pluginFailures, errors, running *prometheus.Desc
}

func newCollector() *collector {
	part := []string{"transform", "partition"}
	return &collector{
		committed:      prometheus.NewDesc("ledge_transform_committed_offset", "Input offset below which every record's outputs are in the transform's output topic.", part, nil),
		lag:            prometheus.NewDesc("ledge_transform_lag_records", "Records of the input partition not yet transformed: high watermark minus the committed offset, less the offsets recoveries skipped.", part, nil),
		in:             prometheus.NewDesc("ledge_transform_records_in_total", "Input records the transform consumed in committed steps since it started.", part, nil),
		out:            prometheus.NewDesc("ledge_transform_records_out_total", "Output records the transform appended in committed steps since it started.", part, nil),
		pluginFailures: prometheus.NewDesc("ledge_transform_plugin_failures_total", "Failed calls of the transform's plugin (trap, deadline, memory limit, invalid answer) since it started; the input stays where it was.", part, nil),
		errors:         prometheus.NewDesc("ledge_transform_errors_total", "Failures of the partition's runner, the plugin's included, since the transform started.", part, nil),
		running:        prometheus.NewDesc("ledge_transform_running", "1 while the transform runs; 0 when paused or stopped by an error (its topics gone or re-created).", []string{"transform"}, nil),
	}
}

// RegisterMetrics registers the metrics of m's transforms in reg. A node
// opened again with the same registry takes over the collector an
// earlier manager registered there.
func RegisterMetrics(reg prometheus.Registerer, m *Manager) error {
	c := newCollector()
	c.m.Store(m)
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if old, ok := are.ExistingCollector.(*collector); ok {
			old.m.Store(m)
			return nil
		}
	}
	return err
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.committed, c.lag, c.in, c.out, c.pluginFailures, c.errors, c.running} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m.Load()
	if m == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, info := range m.List() {
		name := info.Spec.Name
		running := 0.0
		if !info.Spec.Paused && info.Error == "" {
			running = 1
		}
		gauge(c.running, running, name)
		for _, p := range info.Partitions {
			l := []string{name, strconv.Itoa(int(p.Partition))}
			gauge(c.committed, float64(p.Committed), l...)
			gauge(c.lag, float64(p.Lag), l...)
			counter(c.in, float64(p.RecordsIn), l...)
			counter(c.out, float64(p.RecordsOut), l...)
			counter(c.pluginFailures, float64(p.PluginFailures), l...)
			counter(c.errors, float64(p.Errors), l...)
		}
	}
}
