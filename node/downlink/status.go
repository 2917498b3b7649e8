package downlink

import (
	"net"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/twmb/franz-go/pkg/kgo"
)

// State is a downlink's phase.
type State uint8

const (
	Connecting State = iota // reading the Kafka topic, fencing, recovering positions
	Running                 // consuming and appending
	Backoff                 // waiting after a failure
	Fenced                  // a newer incarnation took over: stopped for good
	Stopped                 // Run returned
)

// String names the state.
func (s State) String() string {
	switch s {
	case Connecting:
		return "connecting"
	case Running:
		return "running"
	case Backoff:
		return "backoff"
	case Fenced:
		return "fenced"
	}
	return "stopped"
}

// PartitionStatus is one Kafka partition of a downlink.
type PartitionStatus struct {
	// Partition is the Kafka partition; Local the local partition it is
	// appended to.
	Partition int32
	Local     uint32
	// Producer and Epoch are the idempotent producer appending it now.
	Producer fence.ProducerID
	Epoch    fence.ProducerEpoch
	// Position is the next Kafka offset to append; -1 until known (the
	// partition's start).
	Position int64
	// HighWatermark is Kafka's, as last fetched; -1 unknown.
	HighWatermark int64
	// Lag is HighWatermark - Position once both are known (transaction
	// markers and compacted offsets count); HighWatermark, an upper
	// bound, until the position is.
	Lag int64
	// Records counts the records appended by this process.
	Records uint64
	// Deleted counts the records Kafka deleted (retention, DeleteRecords)
	// before the downlink read them: they were skipped.
	Deleted uint64
}

// Status is what `ledge downlink status`, the metrics and the status page
// show of a downlink.
type Status struct {
	State State
	// Connected: the Kafka client holds a connection to a broker.
	Connected bool
	// Records counts the records appended by this process.
	Records uint64
	// Failures counts failed starts and appends; LastError is the latest
	// failure or warning (records deleted before they were read, a lost
	// connection).
	Failures  uint64
	LastError string
	// FailingSince is when the current run of failures began; zero once
	// the downlink appends again.
	FailingSince time.Time
	// Backoff is the wait in progress after a failure and RetryAt its
	// end; zero unless State is Backoff.
	Backoff time.Duration
	RetryAt time.Time
	// Partitions are the Kafka partitions, in order, once known.
	Partitions []PartitionStatus
}

// Status returns the downlink's status now.
func (d *Downlink) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.s
	s.Connected = d.conns > 0
	s.Partitions = append([]PartitionStatus(nil), d.s.Partitions...)
	return s
}

func (d *Downlink) update(fn func(s *Status)) {
	d.mu.Lock()
	fn(&d.s)
	d.mu.Unlock()
}

func (d *Downlink) updatePartition(k int32, fn func(p *PartitionStatus)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.s.Partitions {
		if d.s.Partitions[i].Partition == k {
			p := &d.s.Partitions[i]
			fn(p)
			switch {
			case p.HighWatermark >= 0 && p.Position >= 0:
				p.Lag = max(0, p.HighWatermark-p.Position)
			case p.HighWatermark >= 0:
				p.Lag = p.HighWatermark // from Kafka's start: an upper bound
			}
			return
		}
	}
}

// connHooks tells the status whether the Kafka client holds a connection.
type connHooks struct{ d *Downlink }

var (
	_ kgo.HookBrokerConnect    = connHooks{}
	_ kgo.HookBrokerDisconnect = connHooks{}
)

func (h connHooks) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if err != nil {
		h.d.s.LastError = "downlink: connect: " + err.Error()
		return
	}
	h.d.conns++
}

func (h connHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	h.d.conns = max(0, h.d.conns-1)
}
