package session

import (
	"context"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// The requests of a session as a transport that serves them one call at
// a time sees them (the Kafka listener's kafka.Session): each method is a
// call of the session, refused once its token expired or was revoked,
// whose error carries the status a QUIC reply would (wire.Error).

// TokenID names the session's token, which a listener's admission bounds
// the connections of.
func (s *Session) TokenID() string { return s.tok.Info.ID }

// Valid returns an error once the session's token expired or was revoked.
func (s *Session) Valid() error { return wireError(s.tok.Valid(s.n.Now())) }

// call is a request of the session, refused once its token expired or
// was revoked.
func (s *Session) call() (*Call, error) {
	if err := s.tok.Valid(s.n.Now()); err != nil {
		return nil, wireError(err)
	}
	return s.Call(0), nil
}

// wireError gives err the status a QUIC reply would carry.
func wireError(err error) error {
	if err == nil {
		return nil
	}
	st, msg := StatusOf(err)
	return &wire.Error{Status: st, Message: msg}
}

// Authorize checks, before any of a request's payload is worked on, that
// the token holds scope on topic and that the topic exists, with the
// partition when p >= 0.
func (s *Session) Authorize(_ context.Context, name string, p int32, scope wire.Scope) error {
	r, err := s.call()
	if err != nil {
		return err
	}
	if err := r.allow(name, scope); err != nil {
		return wireError(err)
	}
	if p < 0 {
		_, err = r.s.n.Lookup(name, [16]byte{})
	} else {
		_, _, err = r.partitionOf(name, [16]byte{}, uint32(p))
	}
	return wireError(err)
}

func serveOne[Req, Rep any](ctx context.Context, s *Session, m Req, fn func(*Call, context.Context, Req) (Rep, error)) (Rep, error) {
	r, err := s.call()
	if err != nil {
		var zero Rep
		return zero, err
	}
	rep, err := fn(r, ctx, m)
	return rep, wireError(err)
}

func (s *Session) ListTopics(ctx context.Context) (*wire.ListTopicsReply, error) {
	return serveOne(ctx, s, &wire.ListTopicsRequest{}, (*Call).ListTopics)
}

func (s *Session) DescribeTopic(ctx context.Context, m *wire.DescribeTopicRequest) (*wire.DescribeTopicReply, error) {
	return serveOne(ctx, s, m, (*Call).DescribeTopic)
}

func (s *Session) CreateTopic(ctx context.Context, m *wire.CreateTopicRequest) (*wire.CreateTopicReply, error) {
	return serveOne(ctx, s, m, (*Call).CreateTopic)
}

func (s *Session) DeleteTopic(ctx context.Context, m *wire.DeleteTopicRequest) (*wire.DeleteTopicReply, error) {
	return serveOne(ctx, s, m, (*Call).DeleteTopic)
}

func (s *Session) Purge(ctx context.Context, m *wire.PurgeRequest) (*wire.PurgeReply, error) {
	return serveOne(ctx, s, m, (*Call).Purge)
}

func (s *Session) InitProducer(ctx context.Context, m *wire.InitProducerRequest) (*wire.InitProducerReply, error) {
	return serveOne(ctx, s, m, (*Call).InitProducer)
}

// Produce returns once the append is ordered, with wait (nil when there
// is nothing to wait for), which returns once it is durable.
func (s *Session) Produce(ctx context.Context, m *wire.ProduceRequest) (*wire.ProduceReply, func(context.Context) error, error) {
	r, err := s.call()
	if err != nil {
		return nil, nil, err
	}
	r.Defer() // the wait for durability is the caller's
	rep, err := r.Produce(ctx, m)
	if err != nil {
		return nil, nil, wireError(err)
	}
	if !r.deferred {
		return rep, nil, nil
	}
	return rep, func(ctx context.Context) error { return wireError(r.WaitDurable(ctx)) }, nil
}

func (s *Session) ResetPosition(ctx context.Context, m *wire.ResetPositionRequest) (*wire.ResetPositionReply, error) {
	return serveOne(ctx, s, m, (*Call).ResetPosition)
}

// Poll's reply refers to stored batches until release is called.
func (s *Session) Poll(ctx context.Context, m *wire.PollRequest) (*wire.PollReply, func(), error) {
	r, err := s.call()
	if err != nil {
		return nil, nil, err
	}
	rep, err := r.Poll(ctx, m)
	if err != nil {
		r.ReleasePolled()
		return nil, nil, wireError(err)
	}
	return rep, r.ReleasePolled, nil
}

// partition returns the topic and partition a request of the session
// may read.
func (s *Session) partition(name string, p uint32) (*Topic, error) {
	r, err := s.call()
	if err != nil {
		return nil, err
	}
	if err := r.allow(name, wire.ScopeConsume); err != nil {
		return nil, wireError(err)
	}
	t, _, err := r.partitionOf(name, [16]byte{}, p)
	return t, wireError(err)
}

// Lineage is how each history epoch of the partition began.
func (s *Session) Lineage(_ context.Context, name string, p uint32) ([]fence.HistoryTransition, error) {
	t, err := s.partition(name, p)
	if err != nil {
		return nil, err
	}
	return t.Logs[p].Lineage(), nil
}

// OffsetForTime is the first offset whose timestamp is at or after ts
// (unix ms), or the high watermark.
func (s *Session) OffsetForTime(ctx context.Context, name string, p uint32, ts int64) (uint64, error) {
	t, err := s.partition(name, p)
	if err != nil {
		return 0, err
	}
	off, err := owner.OffsetForTime(ctx, t.Logs[p], ts)
	return off, wireError(err)
}

// GroupOffsets reads a group's committed offsets, resolved in each
// partition's current history; a partition the token may not read says
// so in its status.
func (s *Session) GroupOffsets(_ context.Context, group string, ps []wire.TopicPartition) ([]wire.GroupOffset, error) {
	r, err := s.call()
	if err != nil {
		return nil, err
	}
	out := make([]wire.GroupOffset, len(ps))
	for i, p := range ps {
		if err := r.allow(p.Topic, wire.ScopeConsume); err != nil {
			out[i].Status, out[i].Message = StatusOf(err)
			continue
		}
		out[i] = GroupOffset(s.n, p.Topic, p.Partition, group)
	}
	return out, nil
}

func (s *Session) JoinGroup(ctx context.Context, m *wire.JoinGroupRequest) (*wire.JoinGroupReply, error) {
	return serveOne(ctx, s, m, (*Call).JoinGroup)
}

func (s *Session) Heartbeat(ctx context.Context, m *wire.HeartbeatRequest) (*wire.HeartbeatReply, error) {
	return serveOne(ctx, s, m, (*Call).Heartbeat)
}

func (s *Session) LeaveGroup(ctx context.Context, m *wire.LeaveGroupRequest) (*wire.LeaveGroupReply, error) {
	return serveOne(ctx, s, m, (*Call).LeaveGroup)
}

func (s *Session) DescribeGroup(ctx context.Context, m *wire.DescribeGroupRequest) (*wire.DescribeGroupReply, error) {
	return serveOne(ctx, s, m, (*Call).DescribeGroup)
}

func (s *Session) ListGroups(ctx context.Context) (*wire.ListGroupsReply, error) {
	return serveOne(ctx, s, &wire.ListGroupsRequest{}, (*Call).ListGroups)
}
