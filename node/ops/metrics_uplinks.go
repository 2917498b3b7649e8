package ops

import (
	"strconv"

	"github.com/ledgemq/ledge/node/uplink"
	"github.com/prometheus/client_golang/prometheus"
)

// The uplinks' metrics, read from the attached node's forwarders when
// /metrics is scraped (labels topic and partition; ledge_uplink_state
// also state). docs/OPERATIONS.md lists them.

// uplinkDescs are the uplink metrics.
type uplinkDescs struct {
	position, lagRecords, lagSeconds                  *prometheus.Desc
	forwarded, transactions, dropped, failures        *prometheus.Desc
	state, backoff, failingSeconds, heldBack, blocked *prometheus.Desc
}

func newUplinkDescs() uplinkDescs {
	return uplinkDescs{
		position:       partitionDesc("ledge_uplink_position", "Next Ledge offset the uplink forwards: the position committed in Kafka (0 until the forwarder first read it)."),
		lagRecords:     partitionDesc("ledge_uplink_lag_records", "Records not yet forwarded to Kafka: high watermark minus the uplink's position, less the offsets recoveries skipped."),
		lagSeconds:     partitionDesc("ledge_uplink_lag_seconds", "Age of the oldest record not yet forwarded to Kafka, by its timestamp; 0 when caught up."),
		forwarded:      partitionDesc("ledge_uplink_forwarded_records_total", "Records committed to Kafka by the uplink since its forwarder started."),
		transactions:   partitionDesc("ledge_uplink_transactions_total", "Kafka transactions the uplink committed since its forwarder started."),
		dropped:        partitionDesc("ledge_uplink_dropped_records_total", "Records gone before they were forwarded (retention under drop-oldest, or a purge), since the forwarder started."),
		failures:       partitionDesc("ledge_uplink_failures_total", "Failed forwarding attempts (Kafka unreachable, transaction refused) since the forwarder started."),
		state:          prometheus.NewDesc("ledge_uplink_state", "1 for the forwarder's current state: connecting, forwarding, backoff, fenced or stopped.", []string{"topic", "partition", "state"}, nil),
		backoff:        partitionDesc("ledge_uplink_backoff_seconds", "Wait in progress before the next attempt after a failure; 0 when not backing off."),
		failingSeconds: partitionDesc("ledge_uplink_failing_seconds", "Time since the current run of failed attempts began; 0 while forwarding works."),
		heldBack:       partitionDesc("ledge_uplink_retention_held_records", "Records retention kept at its latest run only because they were not forwarded yet (overflow block)."),
		blocked:        partitionDesc("ledge_uplink_overflow_block", "1 when the uplink's overflow policy is block (retention waits for forwarding), 0 for drop-oldest."),
	}
}

// uplinkCollector reads the attached node's uplinks at scrape time.
type uplinkCollector struct {
	m *PromMetrics
	d uplinkDescs
}

// Describe implements prometheus.Collector.
func (c *uplinkCollector) Describe(ch chan<- *prometheus.Desc) {
	d := c.d
	for _, x := range []*prometheus.Desc{
		d.position, d.lagRecords, d.lagSeconds, d.forwarded, d.transactions, d.dropped, d.failures,
		d.state, d.backoff, d.failingSeconds, d.heldBack, d.blocked,
	} {
		ch <- x
	}
}

// Collect implements prometheus.Collector.
func (c *uplinkCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
	}
	c.m.ref.with(func(n Source) {
		if n.Uplinks() == nil {
			return
		}
		now := n.Uplinks().Now()
		for _, info := range n.Uplinks().List() {
			for i, p := range info.Partitions {
				l := []string{info.Spec.Topic, strconv.Itoa(i)}
				gauge(d.position, float64(p.Position), l...)
				gauge(d.lagRecords, float64(p.LagRecords), l...)
				gauge(d.lagSeconds, p.LagAge.Seconds(), l...)
				counter(d.forwarded, float64(p.Forwarded), l...)
				counter(d.transactions, float64(p.Transactions), l...)
				counter(d.dropped, float64(p.Dropped), l...)
				counter(d.failures, float64(p.Failures), l...)
				for s := uplink.Connecting; s <= uplink.Stopped; s++ {
					gauge(d.state, b2f(p.State == s), l[0], l[1], s.String())
				}
				gauge(d.backoff, p.Backoff.Seconds(), l...)
				failing := 0.0
				if !p.FailingSince.IsZero() {
					failing = max(0, now.Sub(p.FailingSince).Seconds())
				}
				gauge(d.failingSeconds, failing, l...)
				gauge(d.heldBack, float64(p.HeldBack), l...)
				gauge(d.blocked, b2f(p.Overflow == uplink.Block), l...)
			}
		}
	})
}
