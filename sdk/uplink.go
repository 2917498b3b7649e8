package sdk

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// UplinkConfig is a topic's uplink to Kafka: every partition is forwarded
// exactly once to the Kafka topic To (see docs/FENCING.md, section 9).
type UplinkConfig struct {
	// Seeds are Kafka bootstrap brokers, host:port.
	Seeds []string
	// To is the Kafka topic; it must exist.
	To string
	// Partitioning is "same" (Ledge partition i to Kafka partition i, the
	// default) or "key" (Kafka's key hash chooses).
	Partitioning string
	// Overflow is "block" (the default: retention never deletes records
	// not yet forwarded) or "drop-oldest" (retention runs; what it deletes
	// unforwarded is counted as dropped).
	Overflow string
	TLS      *UplinkTLS
	SASL     *UplinkSASL
}

// UplinkTLS configures TLS to Kafka. The paths are on the node.
type UplinkTLS struct {
	CAFile, CertFile, KeyFile, ServerName string
}

// UplinkSASL configures SASL to Kafka: Mechanism PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512. The node reads the password from PasswordFile (a path on
// the node), so it is never sent over the wire nor stored in metadata.
type UplinkSASL struct {
	Mechanism, User, PasswordFile string
}

// Uplink is a topic's uplink with its partitions' forwarders.
type Uplink struct {
	Topic      string
	Config     UplinkConfig
	Partitions []UplinkPartition
}

// UplinkPartition is one partition's forwarder.
type UplinkPartition struct {
	Partition uint32
	// State is connecting, forwarding, backoff, fenced or stopped.
	State string
	// Position is the next offset to forward (committed in Kafka).
	Position, HighWatermark uint64
	// LagRecords is HighWatermark - Position; LagAge the age of the
	// oldest record not yet forwarded (0 when caught up or unknown).
	LagRecords uint64
	LagAge     time.Duration
	// Forwarded counts records committed to Kafka since the forwarder
	// started; Dropped records gone before they were forwarded (a purge,
	// or retention under drop-oldest); Failures failed attempts.
	Forwarded, Dropped, Failures uint64
	TransactionalID              string
	LastError                    string
	// Transactions counts the Kafka transactions committed.
	Transactions uint64
	// Failing is how long attempts have been failing (Kafka unreachable,
	// transactions refused; 0 while forwarding works); Backoff the wait in
	// progress before the next attempt.
	Failing, Backoff time.Duration
	// HeldBack is the records retention kept at its latest run only
	// because they were not forwarded yet (overflow "block"): the topic is
	// over its retention limits by that much.
	HeldBack uint64
}

// AddUplink adds (or replaces) the uplink of topic. It needs the admin
// scope. The forwarders resume from the positions committed in Kafka.
func (c *Client) AddUplink(ctx context.Context, topic string, cfg UplinkConfig) error {
	spec, err := uplinkSpecToWire(topic, cfg)
	if err != nil {
		return err
	}
	return withTopic(c.call(ctx, &wire.AddUplinkRequest{Spec: spec}, &wire.AddUplinkReply{}), topic)
}

// ListUplinks lists the node's uplinks by topic. It needs the admin scope.
func (c *Client) ListUplinks(ctx context.Context) ([]Uplink, error) {
	var reply wire.ListUplinksReply
	if err := c.call(ctx, &wire.ListUplinksRequest{}, &reply); err != nil {
		return nil, err
	}
	out := make([]Uplink, len(reply.Uplinks))
	for i := range reply.Uplinks {
		out[i] = uplinkFromWire(reply.Uplinks[i])
	}
	return out, nil
}

// UplinkStatus returns the uplink of topic. It needs the admin scope.
func (c *Client) UplinkStatus(ctx context.Context, topic string) (Uplink, error) {
	var reply wire.UplinkStatusReply
	if err := c.call(ctx, &wire.UplinkStatusRequest{Topic: topic}, &reply); err != nil {
		return Uplink{}, withTopic(err, topic)
	}
	return uplinkFromWire(reply.Uplink), nil
}

// RemoveUplink stops and forgets the uplink of topic. Records not yet
// forwarded stay in the topic; the position stays in Kafka, so adding the
// uplink again resumes from it. It needs the admin scope.
func (c *Client) RemoveUplink(ctx context.Context, topic string) error {
	return withTopic(c.call(ctx, &wire.RemoveUplinkRequest{Topic: topic}, &wire.RemoveUplinkReply{}), topic)
}

func uplinkSpecToWire(topic string, cfg UplinkConfig) (wire.UplinkSpec, error) {
	s := wire.UplinkSpec{Topic: topic, Seeds: cfg.Seeds, To: cfg.To}
	switch cfg.Partitioning {
	case "", "same":
	case "key":
		s.Partitioning = 1
	default:
		return s, fmt.Errorf("sdk: uplink partitioning %q: want same or key", cfg.Partitioning)
	}
	switch cfg.Overflow {
	case "", "block":
	case "drop-oldest":
		s.Overflow = 1
	default:
		return s, fmt.Errorf("sdk: uplink overflow %q: want block or drop-oldest", cfg.Overflow)
	}
	if t := cfg.TLS; t != nil {
		s.TLS, s.TLSCAFile, s.TLSCertFile, s.TLSKeyFile, s.TLSServer = true, t.CAFile, t.CertFile, t.KeyFile, t.ServerName
	}
	if a := cfg.SASL; a != nil {
		s.SASLMechanism, s.SASLUser, s.SASLPasswordFile = a.Mechanism, a.User, a.PasswordFile
	}
	return s, nil
}

var uplinkStates = [...]string{"connecting", "forwarding", "backoff", "fenced", "stopped"}

func uplinkFromWire(u wire.UplinkInfo) Uplink {
	s := u.Spec
	out := Uplink{Topic: s.Topic, Config: UplinkConfig{Seeds: s.Seeds, To: s.To, Partitioning: "same", Overflow: "block"}}
	if s.Partitioning == 1 {
		out.Config.Partitioning = "key"
	}
	if s.Overflow == 1 {
		out.Config.Overflow = "drop-oldest"
	}
	if s.TLS {
		out.Config.TLS = &UplinkTLS{CAFile: s.TLSCAFile, CertFile: s.TLSCertFile, KeyFile: s.TLSKeyFile, ServerName: s.TLSServer}
	}
	if s.SASLMechanism != "" {
		out.Config.SASL = &UplinkSASL{Mechanism: s.SASLMechanism, User: s.SASLUser, PasswordFile: s.SASLPasswordFile}
	}
	for _, p := range u.Partitions {
		state := "unknown"
		if int(p.State) < len(uplinkStates) {
			state = uplinkStates[p.State]
		}
		out.Partitions = append(out.Partitions, UplinkPartition{
			Partition: p.Partition, State: state, Position: p.Position, HighWatermark: p.HighWatermark,
			LagRecords: p.LagRecords, LagAge: time.Duration(p.LagAgeNanos), Forwarded: p.Forwarded,
			Dropped: p.Dropped, Failures: p.Failures, TransactionalID: p.TransactionalID, LastError: p.LastError,
			Transactions: p.Transactions, Failing: time.Duration(p.FailingNanos), Backoff: time.Duration(p.BackoffNanos),
			HeldBack: p.HeldBack,
		})
	}
	return out
}
