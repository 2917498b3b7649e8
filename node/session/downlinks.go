package session

import (
	"context"
	"errors"
	"time"

	"github.com/ledgemq/ledge/node/downlink"
	"github.com/ledgemq/ledge/transport/wire"
)

// Handlers of the downlink admin requests, served by the node's downlink
// manager.

func downlinkRequestError(err error) error {
	if errors.Is(err, downlink.ErrConfig) || errors.Is(err, downlink.ErrNoDownlink) {
		return invalidArgument(err.Error())
	}
	return err
}

func (r *Call) AddDownlink(ctx context.Context, m *wire.AddDownlinkRequest) (*wire.AddDownlinkReply, error) {
	d := r.s.n.Downlinks()
	if err := r.allow(m.Spec.Topic, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if err := d.Add(ctx, downlinkSpecFromWire(m.Spec)); err != nil {
		return nil, downlinkRequestError(err)
	}
	return &wire.AddDownlinkReply{}, nil
}

func (r *Call) ListDownlinks(_ context.Context, _ *wire.ListDownlinksRequest) (*wire.ListDownlinksReply, error) {
	d := r.s.n.Downlinks()
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	rep := &wire.ListDownlinksReply{}
	for _, info := range d.List() {
		if r.s.tok.Sees(info.Spec.Topic) {
			rep.Downlinks = append(rep.Downlinks, downlinkInfoToWire(info, r.s.n.Now()))
		}
	}
	return rep, nil
}

func (r *Call) DownlinkStatus(_ context.Context, m *wire.DownlinkStatusRequest) (*wire.DownlinkStatusReply, error) {
	d := r.s.n.Downlinks()
	if err := r.allow(m.Topic, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	info, err := d.Status(m.Topic)
	if err != nil {
		return nil, downlinkRequestError(err)
	}
	return &wire.DownlinkStatusReply{Downlink: downlinkInfoToWire(info, r.s.n.Now())}, nil
}

func (r *Call) RemoveDownlink(ctx context.Context, m *wire.RemoveDownlinkRequest) (*wire.RemoveDownlinkReply, error) {
	d := r.s.n.Downlinks()
	if err := r.allow(m.Topic, wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if err := d.Remove(ctx, m.Topic); err != nil {
		return nil, downlinkRequestError(err)
	}
	return &wire.RemoveDownlinkReply{}, nil
}

func downlinkSpecFromWire(s wire.DownlinkSpec) downlink.Spec {
	out := downlink.Spec{Topic: s.Topic, Seeds: s.Seeds, From: s.From}
	if s.TLS {
		out.TLS = &downlink.TLS{CAFile: s.TLSCAFile, CertFile: s.TLSCertFile, KeyFile: s.TLSKeyFile, ServerName: s.TLSServer}
	}
	if s.SASLMechanism != "" {
		out.SASL = &downlink.SASL{Mechanism: s.SASLMechanism, User: s.SASLUser, PasswordFile: s.SASLPasswordFile}
	}
	return out
}

func downlinkInfoToWire(info downlink.Info, now time.Time) wire.DownlinkInfo {
	s, st := info.Spec, info.Status
	out := wire.DownlinkInfo{Spec: wire.DownlinkSpec{Topic: s.Topic, Seeds: s.Seeds, From: s.From},
		State: uint8(st.State), Connected: st.Connected, Records: st.Records, Failures: st.Failures,
		LastError: st.LastError, BackoffNanos: uint64(max(st.Backoff, 0))}
	if !st.FailingSince.IsZero() {
		out.FailingNanos = uint64(max(0, now.Sub(st.FailingSince)))
	}
	if t := s.TLS; t != nil {
		out.Spec.TLS, out.Spec.TLSCAFile, out.Spec.TLSCertFile, out.Spec.TLSKeyFile, out.Spec.TLSServer =
			true, t.CAFile, t.CertFile, t.KeyFile, t.ServerName
	}
	if a := s.SASL; a != nil {
		out.Spec.SASLMechanism, out.Spec.SASLUser, out.Spec.SASLPasswordFile = a.Mechanism, a.User, a.PasswordFile
	}
	for _, p := range st.Partitions {
		out.Partitions = append(out.Partitions, wire.DownlinkPartitionStatus{
			Partition: uint32(p.Partition), Local: p.Local, Producer: uint64(p.Producer), Epoch: uint32(p.Epoch),
			Position: p.Position, HighWatermark: p.HighWatermark, Lag: p.Lag, Records: p.Records, Deleted: p.Deleted,
		})
	}
	return out
}
