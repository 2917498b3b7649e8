package session

import (
	"context"
	"errors"
	"time"

	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/wire"
)

// Handlers of the uplink admin requests, served by the node's uplink
// manager.

func uplinkRequestError(err error) error {
	if errors.Is(err, uplink.ErrConfig) || errors.Is(err, uplink.ErrNoUplink) {
		return invalidArgument(err.Error())
	}
	return err
}

func (r *Call) AddUplink(ctx context.Context, m *wire.AddUplinkRequest) (*wire.AddUplinkReply, error) {
	u := r.s.n.Uplinks()
	if err := r.allow(m.Spec.Topic, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if err := u.Add(ctx, uplinkSpecFromWire(m.Spec)); err != nil {
		return nil, uplinkRequestError(err)
	}
	return &wire.AddUplinkReply{}, nil
}

func (r *Call) ListUplinks(_ context.Context, _ *wire.ListUplinksRequest) (*wire.ListUplinksReply, error) {
	u := r.s.n.Uplinks()
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	rep := &wire.ListUplinksReply{}
	for _, info := range u.List() {
		if r.s.tok.Sees(info.Spec.Topic) {
			rep.Uplinks = append(rep.Uplinks, uplinkInfoToWire(info, u.Now()))
		}
	}
	return rep, nil
}

func (r *Call) UplinkStatus(_ context.Context, m *wire.UplinkStatusRequest) (*wire.UplinkStatusReply, error) {
	u := r.s.n.Uplinks()
	if err := r.allow(m.Topic, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := u.Status(m.Topic)
	if err != nil {
		return nil, uplinkRequestError(err)
	}
	return &wire.UplinkStatusReply{Uplink: uplinkInfoToWire(info, u.Now())}, nil
}

func (r *Call) RemoveUplink(ctx context.Context, m *wire.RemoveUplinkRequest) (*wire.RemoveUplinkReply, error) {
	u := r.s.n.Uplinks()
	if err := r.allow(m.Topic, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if err := u.Remove(ctx, m.Topic); err != nil {
		return nil, uplinkRequestError(err)
	}
	return &wire.RemoveUplinkReply{}, nil
}

func uplinkSpecFromWire(s wire.UplinkSpec) uplink.Spec {
	out := uplink.Spec{Topic: s.Topic, Seeds: s.Seeds, To: s.To,
		Partitioning: uplink.Partitioning(s.Partitioning), Overflow: uplink.Overflow(s.Overflow)}
	if s.TLS {
		out.TLS = &uplink.TLS{CAFile: s.TLSCAFile, CertFile: s.TLSCertFile, KeyFile: s.TLSKeyFile, ServerName: s.TLSServer}
	}
	if s.SASLMechanism != "" {
		out.SASL = &uplink.SASL{Mechanism: s.SASLMechanism, User: s.SASLUser, PasswordFile: s.SASLPasswordFile}
	}
	return out
}

func uplinkInfoToWire(info uplink.Info, now time.Time) wire.UplinkInfo {
	s := info.Spec
	out := wire.UplinkInfo{Spec: wire.UplinkSpec{Topic: s.Topic, Seeds: s.Seeds, To: s.To,
		Partitioning: uint8(s.Partitioning), Overflow: uint8(s.Overflow)}}
	if t := s.TLS; t != nil {
		out.Spec.TLS, out.Spec.TLSCAFile, out.Spec.TLSCertFile, out.Spec.TLSKeyFile, out.Spec.TLSServer =
			true, t.CAFile, t.CertFile, t.KeyFile, t.ServerName
	}
	if a := s.SASL; a != nil {
		out.Spec.SASLMechanism, out.Spec.SASLUser, out.Spec.SASLPasswordFile = a.Mechanism, a.User, a.PasswordFile
	}
	for i, p := range info.Partitions {
		out.Partitions = append(out.Partitions, wire.UplinkPartitionStatus{
			Partition: uint32(i), State: uint8(p.State), Position: p.Position, HighWatermark: p.HighWatermark,
			LagRecords: p.LagRecords, LagAgeNanos: uint64(max(p.LagAge, 0)), Forwarded: p.Forwarded,
			Dropped: p.Dropped, Failures: p.Failures, TransactionalID: p.TransactionalID, LastError: p.LastError,
			Transactions: p.Transactions, BackoffNanos: uint64(max(p.Backoff, 0)), HeldBack: p.HeldBack,
			FailingNanos: uint64(failingFor(p, now)),
		})
	}
	return out
}

// failingFor is how long the forwarder's attempts have been failing at now.
func failingFor(p uplink.Status, now time.Time) time.Duration {
	if p.FailingSince.IsZero() {
		return 0
	}
	return max(0, now.Sub(p.FailingSince))
}
