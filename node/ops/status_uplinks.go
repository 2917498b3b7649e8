package ops

import (
	"slices"
	"time"

	"github.com/ledgemq/ledge/node/uplink"
)

// UplinkTopicStatus is a topic's uplink to Kafka on the status page and in
// /api/status.
type UplinkTopicStatus struct {
	Topic string `json:"topic"`
	// To is the Kafka topic; Seeds the bootstrap brokers.
	To           string   `json:"to"`
	Seeds        []string `json:"seeds"`
	Partitioning string   `json:"partitioning"` // "same" or "key"
	// Overflow is "block" (retention waits for forwarding) or
	// "drop-oldest" (retention runs; what it deletes unforwarded is
	// counted as dropped).
	Overflow string `json:"overflow"`
	// Totals over the partitions: records not yet forwarded, the age of
	// the oldest of them, records dropped and held back by retention.
	LagRecords    uint64  `json:"lag_records"`
	LagAgeSeconds float64 `json:"lag_age_seconds"`
	Dropped       uint64  `json:"dropped"`
	HeldBack      uint64  `json:"held_back"`
	// State is the worst partition's: fenced, backoff, connecting,
	// stopped, forwarding.
	State      string                  `json:"state"`
	Partitions []UplinkPartitionStatus `json:"partitions"`
}

// UplinkPartitionStatus is one partition's forwarder.
type UplinkPartitionStatus struct {
	Partition uint32 `json:"partition"`
	State     string `json:"state"`
	// Position is the next offset to forward, as committed in Kafka
	// (known false until the forwarder first reached Kafka).
	Position      uint64 `json:"position"`
	PositionKnown bool   `json:"position_known"`
	HighWatermark uint64 `json:"high_watermark"`
	LagRecords    uint64 `json:"lag_records"`
	// LagAgeSeconds is the age of the oldest record not yet forwarded, by
	// its timestamp (0 when caught up or not known yet).
	LagAgeSeconds float64 `json:"lag_age_seconds"`
	Forwarded     uint64  `json:"forwarded"`
	Transactions  uint64  `json:"transactions"`
	Dropped       uint64  `json:"dropped"`
	Failures      uint64  `json:"failures"`
	LastError     string  `json:"last_error,omitempty"`
	// FailingSeconds is how long forwarding has been failing (0 while it
	// works); BackoffSeconds the wait in progress before the next attempt.
	FailingSeconds float64 `json:"failing_seconds"`
	BackoffSeconds float64 `json:"backoff_seconds"`
	// HeldBack is the records retention kept at its latest run only
	// because they were not forwarded (block); HeldBackAt when it last
	// held any.
	HeldBack        uint64     `json:"held_back"`
	HeldBackAt      *time.Time `json:"held_back_at,omitempty"`
	TransactionalID string     `json:"transactional_id"`
}

// uplinkStateRank orders states from healthy to worst.
func uplinkStateRank(s uplink.State) int {
	switch s {
	case uplink.Stopped:
		return 1
	case uplink.Connecting:
		return 2
	case uplink.Backoff:
		return 3
	case uplink.Fenced:
		return 4
	}
	return 0
}

// uplinkStatuses describes the node's uplinks, durations by the
// forwarders' clock.
func uplinkStatuses(u *uplink.Manager) []UplinkTopicStatus {
	out := []UplinkTopicStatus{}
	if u == nil {
		return out
	}
	now := u.Now()
	for _, info := range u.List() {
		s := info.Spec
		ts := UplinkTopicStatus{
			Topic: s.Topic, To: s.To, Seeds: slices.Clone(s.Seeds), Partitioning: s.Partitioning.String(),
			Overflow: s.Overflow.String(), State: uplink.Forwarding.String(), Partitions: []UplinkPartitionStatus{},
		}
		worst := uplink.Forwarding
		for i, p := range info.Partitions {
			ps := UplinkPartitionStatus{
				Partition: uint32(i), State: p.State.String(), Position: p.Position, PositionKnown: p.Known,
				HighWatermark: p.HighWatermark, LagRecords: p.LagRecords, LagAgeSeconds: p.LagAge.Seconds(),
				Forwarded: p.Forwarded, Transactions: p.Transactions, Dropped: p.Dropped, Failures: p.Failures,
				LastError: p.LastError, BackoffSeconds: p.Backoff.Seconds(), HeldBack: p.HeldBack,
				TransactionalID: p.TransactionalID,
			}
			if !p.FailingSince.IsZero() {
				ps.FailingSeconds = max(0, now.Sub(p.FailingSince).Seconds())
			}
			if !p.HeldBackAt.IsZero() {
				at := p.HeldBackAt
				ps.HeldBackAt = &at
			}
			if uplinkStateRank(p.State) > uplinkStateRank(worst) {
				worst = p.State
			}
			ts.LagRecords += p.LagRecords
			ts.LagAgeSeconds = max(ts.LagAgeSeconds, ps.LagAgeSeconds)
			ts.Dropped += p.Dropped
			ts.HeldBack += p.HeldBack
			ts.Partitions = append(ts.Partitions, ps)
		}
		ts.State = worst.String()
		out = append(out, ts)
	}
	return out
}
