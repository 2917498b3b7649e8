package node

import (
	"context"
	"crypto/tls"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/kafka"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/transport/wire"
)

// The Kafka listener's view of the node (package kafka): a session per
// token whose every method is the handler of the same request (a call,
// server.go), so a Kafka request goes through the same scope checks and
// the same partition owners as a QUIC one. It touches no QUIC type.

// listenKafka starts the Kafka listener on cfg.KafkaListen.
func (n *Node) listenKafka() error {
	var tcfg *tls.Config
	if n.cfg.KafkaTLS {
		tcfg = &tls.Config{GetCertificate: n.certs.GetCertificate, MinVersion: tls.VersionTLS12}
	}
	// The Kafka listener's connections take their places in the QUIC
	// listener's admission (kafka_admission.go): the two listeners'
	// connections together stay under its caps.
	kcfg := kafka.Config{Listen: n.cfg.KafkaListen, TLS: tcfg, Backend: kafkaBackend{n}, Logger: n.log,
		Admission: n.sharedAdmission(), MaxRequestElements: n.cfg.KafkaMaxRequestElements}
	if pm, ok := n.cfg.Metrics.(*ops.PromMetrics); ok {
		m, err := kafka.RegisterMetrics(pm.Registry())
		if err != nil {
			return err
		}
		kcfg.Metrics = m
	}
	s, err := kafka.Listen(kcfg)
	if err != nil {
		return err
	}
	n.kafka = s
	n.log.Info("kafka listener started", "listen", s.Addr(), "tls", tcfg != nil)
	return nil
}

// KafkaAddr is the address of the Kafka listener ("" when there is none).
func (n *Node) KafkaAddr() string {
	if n.kafka == nil {
		return ""
	}
	return n.kafka.Addr()
}

// kafkaForget tells the Kafka listener that a topic (or a group) was
// deleted, so that it drops what it keeps about it.
func (n *Node) kafkaForget(topic, group string) {
	switch {
	case n.kafka == nil:
	case topic != "":
		n.kafka.TopicDeleted(topic)
	case group != "":
		n.kafka.GroupDeleted(group)
	}
}

// closeKafkaToken closes the Kafka connections authenticated with the
// token (revoked), and returns how many.
func (n *Node) closeKafkaToken(rec *tokens.Token) int {
	if n.kafka == nil {
		return 0
	}
	return n.kafka.CloseSessions(func(s kafka.Session) bool {
		ks, ok := s.(*kafkaSession)
		return ok && ks.tok.Info.ID == rec.Info.ID
	})
}

type kafkaBackend struct{ n *Node }

func (b kafkaBackend) Authenticate(secret, host string) (kafka.Session, error) {
	rec, err := b.n.tokens.Authenticate(secret)
	if err != nil {
		return nil, err
	}
	return &kafkaSession{n: b.n, tok: rec, host: host}, nil
}

type kafkaSession struct {
	n    *Node
	tok  *tokens.Token
	host string // the IP address of the client's connection, or ""
}

// TokenID names the session's token, which the shared admission bounds
// the connections of (quic.max_conns_per_token).
func (s *kafkaSession) TokenID() string { return s.tok.Info.ID }

func (s *kafkaSession) Valid() error { return wireError(s.tok.Valid(s.n.cfg.Now())) }

// call is a request of the session, refused once its token expired or
// was revoked.
func (s *kafkaSession) call() (*call, error) {
	if err := s.tok.Valid(s.n.cfg.Now()); err != nil {
		return nil, wireError(err)
	}
	return &call{n: s.n, tok: s.tok}, nil
}

// wireError gives err the status the QUIC server would answer with.
func wireError(err error) error {
	if err == nil {
		return nil
	}
	st, msg := StatusOf(err)
	return &wire.Error{Status: st, Message: msg}
}

func (s *kafkaSession) Authorize(_ context.Context, name string, p int32, scope wire.Scope) error {
	r, err := s.call()
	if err != nil {
		return err
	}
	if err := r.allow(name, scope); err != nil {
		return wireError(err)
	}
	if p < 0 {
		_, err = r.n.lookup(name, [16]byte{})
	} else {
		_, _, err = r.partitionOf(name, [16]byte{}, uint32(p))
	}
	return wireError(err)
}

func kafkaCall[Req, Rep any](ctx context.Context, s *kafkaSession, m Req, fn func(*call, context.Context, Req) (Rep, error)) (Rep, error) {
	r, err := s.call()
	if err != nil {
		var zero Rep
		return zero, err
	}
	rep, err := fn(r, ctx, m)
	return rep, wireError(err)
}

func (s *kafkaSession) ListTopics(ctx context.Context) (*wire.ListTopicsReply, error) {
	return kafkaCall(ctx, s, &wire.ListTopicsRequest{}, (*call).listTopics)
}

func (s *kafkaSession) DescribeTopic(ctx context.Context, m *wire.DescribeTopicRequest) (*wire.DescribeTopicReply, error) {
	return kafkaCall(ctx, s, m, (*call).describeTopic)
}

func (s *kafkaSession) CreateTopic(ctx context.Context, m *wire.CreateTopicRequest) (*wire.CreateTopicReply, error) {
	return kafkaCall(ctx, s, m, (*call).createTopic)
}

func (s *kafkaSession) DeleteTopic(ctx context.Context, m *wire.DeleteTopicRequest) (*wire.DeleteTopicReply, error) {
	return kafkaCall(ctx, s, m, (*call).deleteTopic)
}

func (s *kafkaSession) Purge(ctx context.Context, m *wire.PurgeRequest) (*wire.PurgeReply, error) {
	return kafkaCall(ctx, s, m, (*call).purge)
}

func (s *kafkaSession) InitProducer(ctx context.Context, m *wire.InitProducerRequest) (*wire.InitProducerReply, error) {
	return kafkaCall(ctx, s, m, (*call).initProducer)
}

func (s *kafkaSession) Produce(ctx context.Context, m *wire.ProduceRequest) (*wire.ProduceReply, func(context.Context) error, error) {
	r, err := s.call()
	if err != nil {
		return nil, nil, err
	}
	r.deferring = true // the wait for durability is the caller's
	rep, err := r.produce(ctx, m)
	if err != nil {
		return nil, nil, wireError(err)
	}
	if !r.deferred {
		return rep, nil, nil
	}
	return rep, func(ctx context.Context) error { return wireError(r.waitDurable(ctx)) }, nil
}

func (s *kafkaSession) ResetPosition(ctx context.Context, m *wire.ResetPositionRequest) (*wire.ResetPositionReply, error) {
	return kafkaCall(ctx, s, m, (*call).resetPosition)
}

func (s *kafkaSession) Poll(ctx context.Context, m *wire.PollRequest) (*wire.PollReply, func(), error) {
	r, err := s.call()
	if err != nil {
		return nil, nil, err
	}
	rep, err := r.poll(ctx, m)
	if err != nil {
		r.releasePolled()
		return nil, nil, wireError(err)
	}
	return rep, r.releasePolled, nil
}

// partition returns the topic and partition a request of the session
// may read.
func (s *kafkaSession) partition(name string, p uint32) (*topic, error) {
	r, err := s.call()
	if err != nil {
		return nil, err
	}
	if err := r.allow(name, wire.ScopeConsume); err != nil {
		return nil, wireError(err)
	}
	_, _, err = r.partitionOf(name, [16]byte{}, p)
	if err != nil {
		return nil, wireError(err)
	}
	t, err := r.n.lookup(name, [16]byte{})
	return t, wireError(err)
}

func (s *kafkaSession) Lineage(_ context.Context, name string, p uint32) ([]fence.HistoryTransition, error) {
	t, err := s.partition(name, p)
	if err != nil {
		return nil, err
	}
	return t.logs[p].Lineage(), nil
}

func (s *kafkaSession) OffsetForTime(ctx context.Context, name string, p uint32, ts int64) (uint64, error) {
	t, err := s.partition(name, p)
	if err != nil {
		return 0, err
	}
	off, err := owner.OffsetForTime(ctx, t.logs[p], ts)
	return off, wireError(err)
}

func (s *kafkaSession) GroupOffsets(_ context.Context, group string, ps []wire.TopicPartition) ([]wire.GroupOffset, error) {
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
		out[i] = nodeGroupTopics{s.n}.GroupOffset(p.Topic, p.Partition, group)
	}
	return out, nil
}

func (s *kafkaSession) JoinGroup(ctx context.Context, m *wire.JoinGroupRequest) (*wire.JoinGroupReply, error) {
	return kafkaCall(ctx, s, m, func(r *call, ctx context.Context, m *wire.JoinGroupRequest) (*wire.JoinGroupReply, error) {
		return serveJoin(r.n.groups, ctx, r.allow, s.host, m)
	})
}

func (s *kafkaSession) Heartbeat(ctx context.Context, m *wire.HeartbeatRequest) (*wire.HeartbeatReply, error) {
	return kafkaCall(ctx, s, m, func(r *call, ctx context.Context, m *wire.HeartbeatRequest) (*wire.HeartbeatReply, error) {
		return serveHeartbeat(r.n.groups, ctx, r.allow, m)
	})
}

func (s *kafkaSession) LeaveGroup(ctx context.Context, m *wire.LeaveGroupRequest) (*wire.LeaveGroupReply, error) {
	return kafkaCall(ctx, s, m, func(r *call, ctx context.Context, m *wire.LeaveGroupRequest) (*wire.LeaveGroupReply, error) {
		return serveLeave(r.n.groups, ctx, r.allow, m)
	})
}

func (s *kafkaSession) DescribeGroup(ctx context.Context, m *wire.DescribeGroupRequest) (*wire.DescribeGroupReply, error) {
	return kafkaCall(ctx, s, m, func(r *call, ctx context.Context, m *wire.DescribeGroupRequest) (*wire.DescribeGroupReply, error) {
		return serveDescribe(r.n.groups, ctx, r.allow, m)
	})
}

func (s *kafkaSession) ListGroups(ctx context.Context) (*wire.ListGroupsReply, error) {
	return kafkaCall(ctx, s, &wire.ListGroupsRequest{}, func(r *call, ctx context.Context, m *wire.ListGroupsRequest) (*wire.ListGroupsReply, error) {
		return serveList(r.n.groups, ctx, r.allow, m)
	})
}

// ParkedPolls is how many long polls, QUIC polls and Kafka fetches alike,
// wait for records now.
func (n *Node) ParkedPolls() int { return len(n.parked) }
