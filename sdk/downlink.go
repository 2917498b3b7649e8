package sdk

import (
	"context"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// DownlinkConfig is a topic's downlink from Kafka: the records of the
// Kafka topic From are appended to the topic exactly once, Kafka
// partition k to partition k mod n, with their keys, values, timestamps
// and headers, each gaining the headers ledge-kafka-partition and
// ledge-kafka-offset (docs/PIPELINES.md, Downlink).
type DownlinkConfig struct {
	// Seeds are Kafka bootstrap brokers, host:port.
	Seeds []string
	// From is the Kafka topic read; it must exist.
	From string
	// TLS and SASL are as an uplink's; the paths are on the node.
	TLS  *UplinkTLS
	SASL *UplinkSASL
}

// Downlink is a topic's downlink and its status.
type Downlink struct {
	Topic  string
	Config DownlinkConfig
	// State is connecting, running, backoff, fenced or stopped.
	State string
	// Connected: the node holds a connection to a Kafka broker.
	Connected bool
	// Records counts the records appended since the node started.
	Records uint64
	// Failures counts failed starts and appends; LastError is the latest
	// failure or warning (records Kafka deleted before they were read).
	Failures  uint64
	LastError string
	// Failing is how long attempts have been failing (0 while appends
	// succeed); Backoff the wait in progress before the next attempt.
	Failing, Backoff time.Duration
	Partitions       []DownlinkPartition
}

// DownlinkPartition is one Kafka partition of a downlink.
type DownlinkPartition struct {
	// Partition is the Kafka partition, Local the topic's partition it is
	// appended to.
	Partition, Local uint32
	// Producer and Epoch are the node's idempotent producer appending it.
	Producer uint64
	Epoch    uint32
	// Position is the next Kafka offset to append (-1: not known yet, the
	// Kafka partition's start); HighWatermark Kafka's as last fetched (-1:
	// unknown); Lag their difference.
	Position, HighWatermark, Lag int64
	// Records counts the records appended since the node started; Deleted
	// the records Kafka deleted (retention) before they were read.
	Records, Deleted uint64
}

// AddDownlink adds (or replaces) the downlink of topic. It needs the
// admin scope. A downlink from the same Kafka topic resumes after the
// last record the topic holds from it.
func (c *Client) AddDownlink(ctx context.Context, topic string, cfg DownlinkConfig) error {
	s := wire.DownlinkSpec{Topic: topic, Seeds: cfg.Seeds, From: cfg.From}
	if t := cfg.TLS; t != nil {
		s.TLS, s.TLSCAFile, s.TLSCertFile, s.TLSKeyFile, s.TLSServer = true, t.CAFile, t.CertFile, t.KeyFile, t.ServerName
	}
	if a := cfg.SASL; a != nil {
		s.SASLMechanism, s.SASLUser, s.SASLPasswordFile = a.Mechanism, a.User, a.PasswordFile
	}
	return withTopic(c.call(ctx, &wire.AddDownlinkRequest{Spec: s}, &wire.AddDownlinkReply{}), topic)
}

// ListDownlinks lists the node's downlinks by topic. It needs the admin
// scope.
func (c *Client) ListDownlinks(ctx context.Context) ([]Downlink, error) {
	var reply wire.ListDownlinksReply
	if err := c.call(ctx, &wire.ListDownlinksRequest{}, &reply); err != nil {
		return nil, err
	}
	out := make([]Downlink, len(reply.Downlinks))
	for i := range reply.Downlinks {
		out[i] = downlinkFromWire(reply.Downlinks[i])
	}
	return out, nil
}

// DownlinkStatus returns the downlink of topic. It needs the admin scope.
func (c *Client) DownlinkStatus(ctx context.Context, topic string) (Downlink, error) {
	var reply wire.DownlinkStatusReply
	if err := c.call(ctx, &wire.DownlinkStatusRequest{Topic: topic}, &reply); err != nil {
		return Downlink{}, withTopic(err, topic)
	}
	return downlinkFromWire(reply.Downlink), nil
}

// RemoveDownlink stops and forgets the downlink of topic. What it
// appended stays. It needs the admin scope.
func (c *Client) RemoveDownlink(ctx context.Context, topic string) error {
	return withTopic(c.call(ctx, &wire.RemoveDownlinkRequest{Topic: topic}, &wire.RemoveDownlinkReply{}), topic)
}

var downlinkStates = [...]string{"connecting", "running", "backoff", "fenced", "stopped"}

func downlinkFromWire(d wire.DownlinkInfo) Downlink {
	s := d.Spec
	out := Downlink{Topic: s.Topic, Config: DownlinkConfig{Seeds: s.Seeds, From: s.From}, State: "unknown",
		Connected: d.Connected, Records: d.Records, Failures: d.Failures, LastError: d.LastError,
		Failing: time.Duration(d.FailingNanos), Backoff: time.Duration(d.BackoffNanos)}
	if int(d.State) < len(downlinkStates) {
		out.State = downlinkStates[d.State]
	}
	if s.TLS {
		out.Config.TLS = &UplinkTLS{CAFile: s.TLSCAFile, CertFile: s.TLSCertFile, KeyFile: s.TLSKeyFile, ServerName: s.TLSServer}
	}
	if s.SASLMechanism != "" {
		out.Config.SASL = &UplinkSASL{Mechanism: s.SASLMechanism, User: s.SASLUser, PasswordFile: s.SASLPasswordFile}
	}
	for _, p := range d.Partitions {
		out.Partitions = append(out.Partitions, DownlinkPartition{
			Partition: p.Partition, Local: p.Local, Producer: p.Producer, Epoch: p.Epoch,
			Position: p.Position, HighWatermark: p.HighWatermark, Lag: p.Lag, Records: p.Records, Deleted: p.Deleted,
		})
	}
	return out
}
