package ops

import (
	"slices"
	"time"

	"github.com/ledgemq/ledge/node/downlink"
)

// DownlinkStatus is a local topic's downlink from Kafka on the status
// page and in /api/status.
type DownlinkStatus struct {
	Topic string `json:"topic"`
	// From is the Kafka topic; Seeds the bootstrap brokers.
	From  string   `json:"from"`
	Seeds []string `json:"seeds"`
	// State is connecting, running, backoff, fenced or stopped.
	State     string `json:"state"`
	Connected bool   `json:"connected"`
	// Records counts the records appended since the node started; Lag
	// and Deleted are the partitions' totals.
	Records   uint64 `json:"records"`
	Lag       int64  `json:"lag"`
	Deleted   uint64 `json:"deleted"`
	Failures  uint64 `json:"failures"`
	LastError string `json:"last_error,omitempty"`
	// FailingSeconds is how long attempts have been failing (0 while
	// appends succeed); BackoffSeconds the wait in progress.
	FailingSeconds float64                   `json:"failing_seconds"`
	BackoffSeconds float64                   `json:"backoff_seconds"`
	Partitions     []DownlinkPartitionStatus `json:"partitions"`
}

// DownlinkPartitionStatus is one Kafka partition of a downlink.
type DownlinkPartitionStatus struct {
	// Partition is the Kafka partition, Local the local one it is
	// appended to.
	Partition int32  `json:"partition"`
	Local     uint32 `json:"local"`
	// Position is the next Kafka offset to append (-1: not known yet);
	// HighWatermark Kafka's as last fetched (-1: unknown).
	Position      int64  `json:"position"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"`
	Records       uint64 `json:"records"`
	Deleted       uint64 `json:"deleted"`
}

// downlinkStatuses describes the node's downlinks at now.
func downlinkStatuses(d *downlink.Manager, now time.Time) []DownlinkStatus {
	out := []DownlinkStatus{}
	if d == nil {
		return out
	}
	for _, info := range d.List() {
		st := info.Status
		ds := DownlinkStatus{Topic: info.Spec.Topic, From: info.Spec.From, Seeds: slices.Clone(info.Spec.Seeds),
			State: st.State.String(), Connected: st.Connected, Records: st.Records, Failures: st.Failures,
			LastError: st.LastError, BackoffSeconds: st.Backoff.Seconds(), Partitions: []DownlinkPartitionStatus{}}
		if !st.FailingSince.IsZero() {
			ds.FailingSeconds = max(0, now.Sub(st.FailingSince).Seconds())
		}
		for _, p := range st.Partitions {
			ds.Lag += p.Lag
			ds.Deleted += p.Deleted
			ds.Partitions = append(ds.Partitions, DownlinkPartitionStatus{Partition: p.Partition, Local: p.Local,
				Position: p.Position, HighWatermark: p.HighWatermark, Lag: p.Lag, Records: p.Records, Deleted: p.Deleted})
		}
		out = append(out, ds)
	}
	return out
}
