package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/wire"
)

// The node's side of the uplink admin requests. The handlers take the
// node's *Uplinks explicitly; the dispatch passes it.

var keyNodeID = []byte("node/id")

// LoadOrCreateNodeID returns the node's id, creating and persisting a
// random one on first use. It lives in the node's metadata, so a restored
// backup of the node has the same id — and its uplinks the same
// transactional ids, which is what fences the original (or the backup).
func LoadOrCreateNodeID(ctx context.Context, meta owner.Metadata) (string, error) {
	v, ok, err := meta.Get(keyNodeID)
	if err != nil {
		return "", err
	}
	if ok && len(v) > 0 {
		return string(v), nil
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b[:])
	t, err := meta.Put(keyNodeID, []byte(id))
	if err != nil {
		return "", err
	}
	return id, meta.Sync(ctx, t)
}

// uplinkPartitions resolves a live topic for Uplinks.
func (n *Node) uplinkPartitions(name string) (fence.TopicID, []uplink.Source, error) {
	t, err := n.lookup(name, [16]byte{})
	if err != nil {
		return fence.TopicID{}, nil, err
	}
	srcs := make([]uplink.Source, len(t.owners))
	for i, o := range t.owners {
		srcs[i] = o
	}
	return t.id, srcs, nil
}

func uplinkRequestError(err error) error {
	if errors.Is(err, uplink.ErrConfig) || errors.Is(err, uplink.ErrNoUplink) {
		return invalidArgument(err.Error())
	}
	return err
}

func (r *call) addUplink(u *uplink.Manager) func(context.Context, *wire.AddUplinkRequest) (*wire.AddUplinkReply, error) {
	return func(ctx context.Context, m *wire.AddUplinkRequest) (*wire.AddUplinkReply, error) {
		if err := r.allow(m.Spec.Topic, wire.ScopeAdmin); err != nil {
			return nil, err
		}
		if err := u.Add(ctx, uplinkSpecFromWire(m.Spec)); err != nil {
			return nil, uplinkRequestError(err)
		}
		return &wire.AddUplinkReply{}, nil
	}
}

func (r *call) listUplinks(u *uplink.Manager) func(context.Context, *wire.ListUplinksRequest) (*wire.ListUplinksReply, error) {
	return func(_ context.Context, _ *wire.ListUplinksRequest) (*wire.ListUplinksReply, error) {
		if err := r.allow("", wire.ScopeAdmin); err != nil {
			return nil, err
		}
		rep := &wire.ListUplinksReply{}
		for _, info := range u.List() {
			if r.tok.Sees(info.Spec.Topic) {
				rep.Uplinks = append(rep.Uplinks, uplinkInfoToWire(info, u.Now()))
			}
		}
		return rep, nil
	}
}

func (r *call) uplinkStatus(u *uplink.Manager) func(context.Context, *wire.UplinkStatusRequest) (*wire.UplinkStatusReply, error) {
	return func(_ context.Context, m *wire.UplinkStatusRequest) (*wire.UplinkStatusReply, error) {
		if err := r.allow(m.Topic, wire.ScopeAdmin); err != nil {
			return nil, err
		}
		info, err := u.Status(m.Topic)
		if err != nil {
			return nil, uplinkRequestError(err)
		}
		return &wire.UplinkStatusReply{Uplink: uplinkInfoToWire(info, u.Now())}, nil
	}
}

func (r *call) removeUplink(u *uplink.Manager) func(context.Context, *wire.RemoveUplinkRequest) (*wire.RemoveUplinkReply, error) {
	return func(ctx context.Context, m *wire.RemoveUplinkRequest) (*wire.RemoveUplinkReply, error) {
		if err := r.allow(m.Topic, wire.ScopeAdmin); err != nil {
			return nil, err
		}
		if err := u.Remove(ctx, m.Topic); err != nil {
			return nil, uplinkRequestError(err)
		}
		return &wire.RemoveUplinkReply{}, nil
	}
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
