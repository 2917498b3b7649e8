package kafka

import (
	"context"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// Backend is the node as the listener sees it.
type Backend interface {
	// Authenticate returns the session of the Ledge token whose secret
	// is given (SASL/PLAIN's password), or an error a client may show.
	// host is the IP address the client connects from.
	Authenticate(secret, host string) (Session, error)
}

// Session serves requests under one token, with the node's own messages.
// Every method checks the token (still valid, the scope on the topic) as
// the QUIC server does, and returns errors whose wire.Status
// (wire.StatusOf) says what happened.
type Session interface {
	// Valid returns an error once the session's token expired or was
	// revoked.
	Valid() error
	// Authorize checks, before any of a request's payload is worked on
	// (decompressed, converted, copied), that the token holds scope on
	// topic and that the topic exists, with the partition when
	// partition >= 0. Its error is the one the request itself would
	// have met.
	Authorize(ctx context.Context, topic string, partition int32, scope wire.Scope) error

	ListTopics(ctx context.Context) (*wire.ListTopicsReply, error)
	DescribeTopic(ctx context.Context, m *wire.DescribeTopicRequest) (*wire.DescribeTopicReply, error)
	CreateTopic(ctx context.Context, m *wire.CreateTopicRequest) (*wire.CreateTopicReply, error)
	DeleteTopic(ctx context.Context, m *wire.DeleteTopicRequest) (*wire.DeleteTopicReply, error)
	Purge(ctx context.Context, m *wire.PurgeRequest) (*wire.PurgeReply, error)
	// Lineage is how each history epoch of the partition began.
	Lineage(ctx context.Context, topic string, partition uint32) ([]fence.HistoryTransition, error)
	// OffsetForTime is the first offset whose timestamp is at or after
	// ts (unix ms), or the high watermark.
	OffsetForTime(ctx context.Context, topic string, partition uint32, ts int64) (uint64, error)

	InitProducer(ctx context.Context, m *wire.InitProducerRequest) (*wire.InitProducerReply, error)
	// Produce appends a Ledge batch through the partition's owner: it
	// returns once the append is ordered, with wait (nil when there is
	// nothing to wait for), which returns once it is durable per the
	// topic's policy. The reply must not be sent before wait returned
	// nil. A connection's next produce may be ordered meanwhile.
	Produce(ctx context.Context, m *wire.ProduceRequest) (rep *wire.ProduceReply, wait func(context.Context) error, err error)
	// Poll reads through the partitions' owners, long polling up to
	// MaxWait. The reply refers to stored batches until release is
	// called.
	Poll(ctx context.Context, m *wire.PollRequest) (rep *wire.PollReply, release func(), err error)

	// ResetPosition sets group members' committed offsets through the
	// owners, which fence each with the token.
	ResetPosition(ctx context.Context, m *wire.ResetPositionRequest) (*wire.ResetPositionReply, error)
	// GroupOffsets reads a group's committed offsets, resolved in each
	// partition's current history.
	GroupOffsets(ctx context.Context, group string, partitions []wire.TopicPartition) ([]wire.GroupOffset, error)

	JoinGroup(ctx context.Context, m *wire.JoinGroupRequest) (*wire.JoinGroupReply, error)
	Heartbeat(ctx context.Context, m *wire.HeartbeatRequest) (*wire.HeartbeatReply, error)
	LeaveGroup(ctx context.Context, m *wire.LeaveGroupRequest) (*wire.LeaveGroupReply, error)
	DescribeGroup(ctx context.Context, m *wire.DescribeGroupRequest) (*wire.DescribeGroupReply, error)
	ListGroups(ctx context.Context) (*wire.ListGroupsReply, error)
}
