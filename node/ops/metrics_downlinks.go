package ops

import (
	"strconv"

	"github.com/ledgemq/ledge/node/downlink"
	"github.com/prometheus/client_golang/prometheus"
)

// The downlinks' metrics, read from the attached node's downlinks when
// /metrics is scraped: labels topic (the local topic) and partition (the
// Kafka partition) for the per-partition series, topic alone for the
// downlink's; ledge_downlink_state adds state.

// downlinkDescs are the downlink metrics.
type downlinkDescs struct {
	position, lag, records, deleted *prometheus.Desc
	state, connected, failures      *prometheus.Desc
	backoff                         *prometheus.Desc
}

func newDownlinkDescs() downlinkDescs {
	topic := []string{"topic"}
	return downlinkDescs{
		position: partitionDesc("ledge_downlink_position", "Next Kafka offset the downlink appends of the Kafka partition (-1 until known: the partition's start)."),
		lag:      partitionDesc("ledge_downlink_lag_records", "Kafka's high watermark of the partition, as last fetched, minus the downlink's position."),
		records:  partitionDesc("ledge_downlink_records_total", "Records of the Kafka partition appended to the local topic since the downlink started."),
		deleted:  partitionDesc("ledge_downlink_deleted_records_total", "Records Kafka deleted (retention) before the downlink read them: skipped."),
		state:    prometheus.NewDesc("ledge_downlink_state", "1 for the downlink's current state: connecting, running, backoff, fenced or stopped.", []string{"topic", "state"}, nil),
		connected: prometheus.NewDesc("ledge_downlink_connected", "1 while the downlink's Kafka client holds a connection to a broker.",
			topic, nil),
		failures: prometheus.NewDesc("ledge_downlink_failures_total", "Failed starts and appends of the downlink since the node started.", topic, nil),
		backoff:  prometheus.NewDesc("ledge_downlink_backoff_seconds", "Wait in progress before the downlink starts again after a failure; 0 when not backing off.", topic, nil),
	}
}

// downlinkCollector reads the attached node's downlinks at scrape time.
type downlinkCollector struct {
	m *PromMetrics
	d downlinkDescs
}

// Describe implements prometheus.Collector.
func (c *downlinkCollector) Describe(ch chan<- *prometheus.Desc) {
	d := c.d
	for _, x := range []*prometheus.Desc{d.position, d.lag, d.records, d.deleted, d.state, d.connected, d.failures, d.backoff} {
		ch <- x
	}
}

// Collect implements prometheus.Collector.
func (c *downlinkCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
	}
	c.m.ref.with(func(n Source) {
		if n.Downlinks() == nil {
			return
		}
		for _, info := range n.Downlinks().List() {
			t, st := info.Spec.Topic, info.Status
			for s := downlink.Connecting; s <= downlink.Stopped; s++ {
				gauge(d.state, b2f(st.State == s), t, s.String())
			}
			gauge(d.connected, b2f(st.Connected), t)
			counter(d.failures, float64(st.Failures), t)
			gauge(d.backoff, st.Backoff.Seconds(), t)
			for _, p := range st.Partitions {
				l := []string{t, strconv.Itoa(int(p.Partition))}
				gauge(d.position, float64(p.Position), l...)
				gauge(d.lag, float64(p.Lag), l...)
				counter(d.records, float64(p.Records), l...)
				counter(d.deleted, float64(p.Deleted), l...)
			}
		}
	})
}
