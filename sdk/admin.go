package sdk

import (
	"context"
	"errors"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// Durability is a topic's acknowledgement policy.
type Durability = wire.Durability

// Durability policies.
const (
	// DurabilityDefault asks for the node's default.
	DurabilityDefault = wire.DurabilityDefault
	// DurabilityAlways acknowledges a produce once it is fsynced (commits
	// are grouped, so many producers share one fsync).
	DurabilityAlways = wire.DurabilityAlways
	// DurabilityInterval fsyncs at least every SyncInterval and
	// acknowledges from the page cache.
	DurabilityInterval = wire.DurabilityInterval
	// DurabilityNone acknowledges from the page cache.
	DurabilityNone = wire.DurabilityNone
)

// Compression is a record batch codec.
type Compression = record.Compression

// Compressions.
const (
	CompressionNone = record.CompressionNone
	CompressionS2   = record.CompressionS2
	CompressionZstd = record.CompressionZstd
)

// TimestampMode says whose clock stamps a topic's records.
type TimestampMode = wire.TimestampMode

// Timestamp modes.
const (
	// TimestampsDefault asks for the node's default (producer).
	TimestampsDefault = wire.TimestampModeDefault
	// TimestampsProducer keeps the timestamps producers set.
	TimestampsProducer = wire.TimestampModeProducer
	// TimestampsAppend stamps records with the node's clock at append.
	TimestampsAppend = wire.TimestampModeAppend
)

// TopicConfig is a topic's configuration. In CreateTopic a zero field asks
// for the node's default, except the retention limits, where zero keeps
// records forever.
type TopicConfig struct {
	// Partitions is the number of partitions (node default: 1).
	Partitions int
	// Durability is when a produce is acknowledged.
	Durability Durability
	// SyncInterval is DurabilityInterval's fsync interval.
	SyncInterval time.Duration
	// Compression is the codec producers use by default.
	Compression Compression
	// RetentionAge deletes whole segments whose records are all older.
	RetentionAge time.Duration
	// RetentionBytes bounds each partition's size.
	RetentionBytes int64
	// SegmentBytes and SegmentAge say when a partition starts a new segment
	// file (the unit retention deletes).
	SegmentBytes int64
	SegmentAge   time.Duration
	// Timestamps says whose clock stamps records.
	Timestamps TimestampMode
	// MaxBatchBytes is the largest record batch the topic accepts.
	MaxBatchBytes int
}

func (c TopicConfig) toWire() wire.TopicConfig {
	return wire.TopicConfig{
		Partitions:     uint32(max(c.Partitions, 0)),
		Durability:     c.Durability,
		SyncInterval:   c.SyncInterval,
		Compression:    c.Compression,
		RetentionAge:   c.RetentionAge,
		RetentionBytes: uint64(max(c.RetentionBytes, 0)),
		SegmentBytes:   uint64(max(c.SegmentBytes, 0)),
		SegmentAge:     c.SegmentAge,
		Timestamps:     c.Timestamps,
		MaxBatchBytes:  uint32(max(c.MaxBatchBytes, 0)),
	}
}

func topicConfigFromWire(w wire.TopicConfig) TopicConfig {
	return TopicConfig{
		Partitions:     int(w.Partitions),
		Durability:     w.Durability,
		SyncInterval:   w.SyncInterval,
		Compression:    w.Compression,
		RetentionAge:   w.RetentionAge,
		RetentionBytes: int64(w.RetentionBytes),
		SegmentBytes:   int64(w.SegmentBytes),
		SegmentAge:     w.SegmentAge,
		Timestamps:     w.Timestamps,
		MaxBatchBytes:  int(w.MaxBatchBytes),
	}
}

// TopicInfo names a topic, its identity and its effective configuration.
type TopicInfo struct {
	Name string
	// ID is random per creation: a topic deleted and created again under
	// the same name has another ID.
	ID     fence.TopicID
	Config TopicConfig
}

func topicInfoFromWire(t wire.TopicInfo) TopicInfo {
	return TopicInfo{Name: t.Name, ID: fence.TopicID(t.ID), Config: topicConfigFromWire(t.Config)}
}

// PartitionState is a partition's range of offsets and its history.
type PartitionState struct {
	Partition int32
	// StartOffset is the first offset a reader may read.
	StartOffset uint64
	// HighWatermark is one past the last offset readers may see.
	HighWatermark uint64
	// History is the partition's history epoch: purge and lossy recovery
	// raise it.
	History uint64
	// Skipped is how many offsets in [StartOffset, HighWatermark) hold no
	// record because a recovery after a crash skipped them (durability
	// interval or none). Only DescribeTopic fills it in, and a node too old
	// to say leaves it zero.
	Skipped uint64
	// Err is why the node could not describe or change the partition
	// (ErrUnknownPartition, ErrPartitionFailed, ...), or nil.
	Err error
}

// Records is how many offsets of the partition hold records, as far as
// the node said: HighWatermark − StartOffset − Skipped (retention that
// has not yet reached a segment may keep a few more readable).
func (p PartitionState) Records() uint64 {
	if p.HighWatermark <= p.StartOffset {
		return 0
	}
	return p.HighWatermark - p.StartOffset - min(p.Skipped, p.HighWatermark-p.StartOffset)
}

func partitionStatesFromWire(op, topic string, ps []wire.PartitionState) []PartitionState {
	out := make([]PartitionState, len(ps))
	for i, p := range ps {
		out[i] = PartitionState{
			Partition:     int32(p.Partition),
			StartOffset:   p.StartOffset,
			HighWatermark: p.HighWatermark,
			History:       p.History,
			Skipped:       p.Skipped,
			Err:           statusError(op, topic, p.Partition, p.Status, p.Message),
		}
	}
	return out
}

// TopicDescription is a topic and the state of each of its partitions.
type TopicDescription struct {
	TopicInfo
	Partitions []PartitionState
}

// CreateTopic creates a topic and returns it with its effective
// configuration. It needs the admin scope; ErrTopicExists if the name is
// taken.
func (c *Client) CreateTopic(ctx context.Context, name string, cfg TopicConfig) (TopicInfo, error) {
	var reply wire.CreateTopicReply
	if err := c.call(ctx, &wire.CreateTopicRequest{Name: name, Config: cfg.toWire()}, &reply); err != nil {
		return TopicInfo{}, withTopic(err, name)
	}
	return topicInfoFromWire(reply.Topic), nil
}

// DeleteTopic deletes a topic with its data, offsets, producer state and
// sessions. It needs the admin scope.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return withTopic(c.call(ctx, &wire.DeleteTopicRequest{Name: name}, &wire.DeleteTopicReply{}), name)
}

// ListTopics lists the topics the token may see, by name.
func (c *Client) ListTopics(ctx context.Context) ([]TopicInfo, error) {
	var reply wire.ListTopicsReply
	if err := c.call(ctx, &wire.ListTopicsRequest{}, &reply); err != nil {
		return nil, err
	}
	out := make([]TopicInfo, len(reply.Topics))
	for i, t := range reply.Topics {
		out[i] = topicInfoFromWire(t)
	}
	return out, nil
}

// DescribeTopic returns a topic's configuration and partition states,
// with the offsets recoveries skipped in each (PartitionState.Skipped).
func (c *Client) DescribeTopic(ctx context.Context, name string) (TopicDescription, error) {
	var reply wire.DescribeTopicReply
	req := &wire.DescribeTopicRequest{Name: name, WithSkipped: true}
	if err := c.callOptional(ctx, req, &wire.DescribeTopicRequest{Name: name}, &reply); err != nil {
		return TopicDescription{}, withTopic(err, name)
	}
	return TopicDescription{
		TopicInfo:  topicInfoFromWire(reply.Topic),
		Partitions: partitionStatesFromWire("describe-topic", name, reply.Partitions),
	}, nil
}

// Purge empties partitions of a topic (all of them when none are named):
// each one's start offset rises to its high watermark and its history
// epoch rises by one, which fences polls and commits made before. Offsets
// are never reused. It returns once the purge is durable, with each
// partition's new state. It needs the admin scope.
func (c *Client) Purge(ctx context.Context, topic string, partitions ...int32) ([]PartitionState, error) {
	var reply wire.PurgeReply
	req := &wire.PurgeRequest{Topic: topic, Partitions: partitionIndexes(partitions)}
	if err := c.call(ctx, req, &reply); err != nil {
		return nil, withTopic(err, topic)
	}
	return partitionStatesFromWire("purge", topic, reply.Partitions), nil
}

// PartitionState returns the start offset, high watermark and history
// epoch of partitions of a topic (all of them when none are named).
func (c *Client) PartitionState(ctx context.Context, topic string, partitions ...int32) ([]PartitionState, error) {
	var reply wire.GetPartitionStateReply
	req := &wire.GetPartitionStateRequest{Topic: topic, Partitions: partitionIndexes(partitions)}
	if err := c.call(ctx, req, &reply); err != nil {
		return nil, withTopic(err, topic)
	}
	return partitionStatesFromWire("get-partition-state", topic, reply.Partitions), nil
}

// CommittedOffset is a consumer's committed position on a partition.
type CommittedOffset struct {
	Partition int32
	// Offset is where the consumer resumes (one past the last record it
	// committed); valid when Committed is true.
	Offset    uint64
	Committed bool
	// History is the history epoch the offset was committed in. An offset
	// from before a purge resumes at the partition's start offset.
	History uint64
	// Err is why the node could not answer for the partition, or nil.
	Err error
}

// Committed returns the committed positions of the named consumer on
// partitions of a topic (all of them when none are named). It looks
// without acting as the consumer (no session), so it works while a
// process is attached under the name; a consumer reads its own with
// Consumer.Committed.
func (c *Client) Committed(ctx context.Context, topic, consumer string, partitions ...int32) ([]CommittedOffset, error) {
	cs, err := c.committed(ctx, topic, wire.Consumer{Kind: wire.ConsumerNamed, Name: consumer}, partitions)
	if err != nil {
		return nil, err
	}
	out := make([]CommittedOffset, len(cs))
	for i, x := range cs {
		out[i] = x.CommittedOffset
	}
	return out, nil
}

type committedWithToken struct {
	CommittedOffset
	token []byte
}

func (c *Client) committed(ctx context.Context, topic string, who wire.Consumer, partitions []int32) ([]committedWithToken, error) {
	if len(partitions) == 0 {
		d, err := c.DescribeTopic(ctx, topic)
		if err != nil {
			return nil, err
		}
		for i := range d.Config.Partitions {
			partitions = append(partitions, int32(i))
		}
	}
	req := &wire.GetCommittedRequest{Consumer: who}
	for _, p := range partitions {
		req.Partitions = append(req.Partitions, wire.TopicPartition{Topic: topic, Partition: uint32(p)})
	}
	var reply wire.GetCommittedReply
	if err := c.call(ctx, req, &reply); err != nil {
		return nil, withTopic(err, topic)
	}
	out := make([]committedWithToken, len(reply.Partitions))
	for i, x := range reply.Partitions {
		p := uint32(0)
		if i < len(partitions) {
			p = uint32(partitions[i])
		}
		out[i] = committedWithToken{
			CommittedOffset: CommittedOffset{
				Partition: int32(p),
				Offset:    x.Offset,
				Committed: x.HasOffset,
				History:   x.History,
				Err:       statusError("get-committed", topic, p, x.Status, x.Message),
			},
			token: append([]byte(nil), x.Token...),
		}
	}
	return out, nil
}

// Scope is a set of permissions a token grants.
type Scope = wire.Scope

// Scopes.
const (
	ScopeProduce = wire.ScopeProduce
	ScopeConsume = wire.ScopeConsume
	ScopeAdmin   = wire.ScopeAdmin
)

// AllTopics as a token's topic grants its scopes on every topic.
const AllTopics = wire.AllTopics

// TokenSpec describes a token to create.
type TokenSpec struct {
	// Label names the token for people.
	Label string
	// Topic is the topic the scopes apply to, or AllTopics.
	Topic  string
	Scopes Scope
	// ExpiresAt ends the token's validity; zero never expires.
	ExpiresAt time.Time
}

// TokenInfo describes a token without its secret.
type TokenInfo struct {
	ID        string
	Label     string
	Topic     string
	Scopes    Scope
	CreatedAt time.Time
	// ExpiresAt is zero for a token that never expires.
	ExpiresAt time.Time
}

func tokenInfoFromWire(t wire.TokenInfo) TokenInfo {
	info := TokenInfo{ID: t.ID, Label: t.Label, Topic: t.Topic, Scopes: t.Scopes, CreatedAt: time.UnixMilli(t.CreatedAt)}
	if t.ExpiresAt != 0 {
		info.ExpiresAt = time.UnixMilli(t.ExpiresAt)
	}
	return info
}

// CreateToken creates a token and returns it with its secret, which the
// node stores only hashed: this is the one time it is shown. It needs the
// admin scope.
func (c *Client) CreateToken(ctx context.Context, spec TokenSpec) (TokenInfo, string, error) {
	req := &wire.CreateTokenRequest{Label: spec.Label, Topic: spec.Topic, Scopes: spec.Scopes}
	if !spec.ExpiresAt.IsZero() {
		req.ExpiresAt = spec.ExpiresAt.UnixMilli()
	}
	var reply wire.CreateTokenReply
	if err := c.call(ctx, req, &reply); err != nil {
		return TokenInfo{}, "", err
	}
	return tokenInfoFromWire(reply.Token), reply.Secret, nil
}

// ListTokens lists the node's tokens without their secrets. It needs the
// admin scope.
func (c *Client) ListTokens(ctx context.Context) ([]TokenInfo, error) {
	var reply wire.ListTokensReply
	if err := c.call(ctx, &wire.ListTokensRequest{}, &reply); err != nil {
		return nil, err
	}
	out := make([]TokenInfo, len(reply.Tokens))
	for i, t := range reply.Tokens {
		out[i] = tokenInfoFromWire(t)
	}
	return out, nil
}

// RevokeToken revokes a token by id; the node closes the connections that
// authenticated with it. It needs the admin scope.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.call(ctx, &wire.RevokeTokenRequest{ID: id}, &wire.RevokeTokenReply{})
}

func partitionIndexes(ps []int32) []uint32 {
	out := make([]uint32, len(ps))
	for i, p := range ps {
		out[i] = uint32(p)
	}
	return out
}

// withTopic fills in the topic of an *Error.
func withTopic(err error, topic string) error {
	if e, ok := err.(*Error); ok && e.Topic == "" {
		e.Topic = topic
	}
	return err
}

// callOptional sends req, which ends with an optional last field; a node
// older than the field refuses it as malformed (docs/PROTOCOL.md §15), and
// is then sent plain, the same request without it.
func (c *Client) callOptional(ctx context.Context, req, plain, reply wire.Message) error {
	err := c.call(ctx, req, reply)
	if errors.Is(err, wire.StatusMalformedRequest) {
		return c.call(ctx, plain, reply)
	}
	return err
}
