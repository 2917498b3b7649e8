package wire_test

import (
	"time"

	"github.com/ledgemq/ledge/record"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

// Generators of valid messages: every value they produce must encode, and
// decode back to itself. Empty slices are nil, as Decode leaves them.

func genName(t *rapid.T, label string) string {
	return rapid.StringN(0, 12, wire.MaxNameLen).Draw(t, label)
}

func genText(t *rapid.T, label string) string {
	return rapid.StringN(0, 40, wire.MaxTextLen).Draw(t, label)
}

func genBytes(t *rapid.T, max int, label string) []byte {
	b := rapid.SliceOfN(rapid.Byte(), 0, max).Draw(t, label)
	if len(b) == 0 {
		return nil
	}
	return b
}

func genSlice[T any](t *rapid.T, max int, label string, gen func(*rapid.T) T) []T {
	n := rapid.IntRange(0, max).Draw(t, label)
	if n == 0 {
		return nil
	}
	s := make([]T, n)
	for i := range s {
		s[i] = gen(t)
	}
	return s
}

func genID(t *rapid.T, label string) (id [16]byte) {
	if rapid.Bool().Draw(t, label+" zero") {
		return id
	}
	copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label))
	return id
}

func genDuration(t *rapid.T, label string) time.Duration {
	return time.Duration(rapid.Int64Min(0).Draw(t, label))
}

func genStatus(t *rapid.T) wire.Status {
	return rapid.SampledFrom(allStatuses()).Draw(t, "status")
}

func genScope(t *rapid.T) wire.Scope {
	return wire.Scope(rapid.IntRange(0, 7).Draw(t, "scopes"))
}

func genTopicConfig(t *rapid.T) wire.TopicConfig {
	return wire.TopicConfig{
		Partitions:     rapid.Uint32().Draw(t, "partitions"),
		Durability:     wire.Durability(rapid.IntRange(0, 3).Draw(t, "durability")),
		SyncInterval:   genDuration(t, "sync interval"),
		Compression:    record.Compression(rapid.IntRange(0, 2).Draw(t, "compression")),
		RetentionAge:   genDuration(t, "retention age"),
		RetentionBytes: rapid.Uint64().Draw(t, "retention bytes"),
		SegmentBytes:   rapid.Uint64().Draw(t, "segment bytes"),
		SegmentAge:     genDuration(t, "segment age"),
		Timestamps:     wire.TimestampMode(rapid.IntRange(0, 2).Draw(t, "timestamps")),
		MaxBatchBytes:  rapid.Uint32().Draw(t, "max batch bytes"),
	}
}

func genTopicInfo(t *rapid.T) wire.TopicInfo {
	return wire.TopicInfo{Name: genName(t, "topic"), ID: genID(t, "topic id"), Config: genTopicConfig(t)}
}

func genPartitionState(t *rapid.T) wire.PartitionState {
	return wire.PartitionState{
		Partition:     rapid.Uint32().Draw(t, "partition"),
		Status:        genStatus(t),
		Message:       genText(t, "message"),
		StartOffset:   rapid.Uint64().Draw(t, "start"),
		HighWatermark: rapid.Uint64().Draw(t, "hw"),
		History:       rapid.Uint64().Draw(t, "history"),
	}
}

func genPartitionIndex(t *rapid.T) uint32 { return rapid.Uint32().Draw(t, "partition") }

func genTokenInfo(t *rapid.T) wire.TokenInfo {
	return wire.TokenInfo{
		ID:        genName(t, "id"),
		Label:     genName(t, "label"),
		Topic:     genName(t, "topic"),
		Scopes:    genScope(t),
		CreatedAt: rapid.Int64().Draw(t, "created"),
		ExpiresAt: rapid.Int64().Draw(t, "expires"),
	}
}

func genConsumer(t *rapid.T) wire.Consumer {
	return wire.Consumer{
		Kind:        wire.ConsumerKind(rapid.IntRange(0, 2).Draw(t, "consumer kind")),
		Name:        genName(t, "consumer"),
		Session:     rapid.Uint64().Draw(t, "session"),
		MemberID:    genName(t, "member"),
		MemberEpoch: rapid.Uint64().Draw(t, "member epoch"),
	}
}

func genPosition(t *rapid.T) wire.Position {
	p := wire.Position{
		Mode:  wire.PositionMode(rapid.IntRange(1, 6).Draw(t, "mode")),
		Reset: rapid.SampledFrom([]wire.PositionMode{0, wire.PositionFirst, wire.PositionEnd}).Draw(t, "reset"),
	}
	switch p.Mode {
	case wire.PositionOffset:
		p.Offset = rapid.Uint64().Draw(t, "offset")
	case wire.PositionTimestamp:
		p.Timestamp = rapid.Int64().Draw(t, "timestamp")
	}
	return p
}

func genToken(t *rapid.T) []byte { return genBytes(t, 100, "token") }

// genBatches draws a byte string standing for stored batches; the poll
// codec carries them without looking inside.
func genBatches(t *rapid.T) []byte { return genBytes(t, 300, "batches") }

// messageCase is one message type: a generator of valid values and a
// constructor of the zero value to decode into.
type messageCase struct {
	name string
	gen  *rapid.Generator[wire.Message]
	zero func() wire.Message
}

func custom[M wire.Message](fn func(*rapid.T) M) *rapid.Generator[wire.Message] {
	return rapid.Custom(func(t *rapid.T) wire.Message { return fn(t) })
}

func zeroOf[T any, M interface {
	*T
	wire.Message
}]() func() wire.Message {
	return func() wire.Message { return M(new(T)) }
}

// messageCases lists every message of version 1.
func messageCases() []messageCase {
	cases := append(coreMessageCases(), groupMessageCases()...)
	cases = append(cases, pluginMessageCases()...)
	cases = append(cases, stateMessageCases()...)
	cases = append(cases, downlinkMessageCases()...)
	cases = append(cases, transformMessageCases()...)
	return append(cases, uplinkMessageCases()...)
}

// coreMessageCases lists the messages of topics, producers, consumers and tokens.
func coreMessageCases() []messageCase {
	return []messageCase{
		{"AuthenticateRequest", custom(func(t *rapid.T) *wire.AuthenticateRequest {
			return &wire.AuthenticateRequest{
				Token: rapid.StringN(0, 64, wire.MaxAuthTokenLen).Draw(t, "token"),
				Flags: wire.AuthFlags(rapid.Uint8Range(0, uint8(wire.AuthReadsRetryAfter)).Draw(t, "flags")),
			}
		}), zeroOf[wire.AuthenticateRequest]()},
		{"AuthenticateReply", custom(func(t *rapid.T) *wire.AuthenticateReply {
			return &wire.AuthenticateReply{TokenID: genName(t, "id"), Topic: genName(t, "topic"), Scopes: genScope(t),
				MaxFrameSize: rapid.Uint32().Draw(t, "max frame"), NodeVersion: genName(t, "version")}
		}), zeroOf[wire.AuthenticateReply]()},
		{"CreateTopicRequest", custom(func(t *rapid.T) *wire.CreateTopicRequest {
			return &wire.CreateTopicRequest{Name: genName(t, "topic"), Config: genTopicConfig(t)}
		}), zeroOf[wire.CreateTopicRequest]()},
		{"CreateTopicReply", custom(func(t *rapid.T) *wire.CreateTopicReply {
			return &wire.CreateTopicReply{Topic: genTopicInfo(t)}
		}), zeroOf[wire.CreateTopicReply]()},
		{"DeleteTopicRequest", custom(func(t *rapid.T) *wire.DeleteTopicRequest {
			return &wire.DeleteTopicRequest{Name: genName(t, "topic"), TopicID: genID(t, "id")}
		}), zeroOf[wire.DeleteTopicRequest]()},
		{"DeleteTopicReply", rapid.Just[wire.Message](&wire.DeleteTopicReply{}),
			zeroOf[wire.DeleteTopicReply]()},
		{"ListTopicsRequest", rapid.Just[wire.Message](&wire.ListTopicsRequest{}),
			zeroOf[wire.ListTopicsRequest]()},
		{"ListTopicsReply", custom(func(t *rapid.T) *wire.ListTopicsReply {
			return &wire.ListTopicsReply{Topics: genSlice(t, 4, "topics", genTopicInfo)}
		}), zeroOf[wire.ListTopicsReply]()},
		{"DescribeTopicRequest", custom(func(t *rapid.T) *wire.DescribeTopicRequest {
			return &wire.DescribeTopicRequest{Name: genName(t, "topic"), WithSkipped: rapid.Bool().Draw(t, "with skipped")}
		}), zeroOf[wire.DescribeTopicRequest]()},
		{"DescribeTopicReply", custom(func(t *rapid.T) *wire.DescribeTopicReply {
			ps := genSlice(t, 4, "partitions", genPartitionState)
			for i := range ps {
				ps[i].Skipped = rapid.SampledFrom([]uint64{0, 1, 1 << 20}).Draw(t, "skipped")
			}
			return &wire.DescribeTopicReply{Topic: genTopicInfo(t), Partitions: ps}
		}), zeroOf[wire.DescribeTopicReply]()},
		{"PurgeRequest", custom(func(t *rapid.T) *wire.PurgeRequest {
			return &wire.PurgeRequest{Topic: genName(t, "topic"), TopicID: genID(t, "id"),
				Partitions: genSlice(t, 6, "partitions", genPartitionIndex)}
		}), zeroOf[wire.PurgeRequest]()},
		{"PurgeReply", custom(func(t *rapid.T) *wire.PurgeReply {
			return &wire.PurgeReply{Partitions: genSlice(t, 4, "partitions", genPartitionState)}
		}), zeroOf[wire.PurgeReply]()},
		{"GetPartitionStateRequest", custom(func(t *rapid.T) *wire.GetPartitionStateRequest {
			return &wire.GetPartitionStateRequest{Topic: genName(t, "topic"), Partitions: genSlice(t, 6, "partitions", genPartitionIndex)}
		}), zeroOf[wire.GetPartitionStateRequest]()},
		{"GetPartitionStateReply", custom(func(t *rapid.T) *wire.GetPartitionStateReply {
			return &wire.GetPartitionStateReply{TopicID: genID(t, "id"), Partitions: genSlice(t, 4, "partitions", genPartitionState)}
		}), zeroOf[wire.GetPartitionStateReply]()},
		{"InitProducerRequest", custom(func(t *rapid.T) *wire.InitProducerRequest {
			return &wire.InitProducerRequest{Name: genName(t, "name"), ProducerID: rapid.Uint64().Draw(t, "id"),
				ProducerEpoch: rapid.Uint32().Draw(t, "epoch")}
		}), zeroOf[wire.InitProducerRequest]()},
		{"InitProducerReply", custom(func(t *rapid.T) *wire.InitProducerReply {
			return &wire.InitProducerReply{ProducerID: rapid.Uint64().Draw(t, "id"), ProducerEpoch: rapid.Uint32().Draw(t, "epoch")}
		}), zeroOf[wire.InitProducerReply]()},
		{"ProduceRequest", custom(func(t *rapid.T) *wire.ProduceRequest {
			return &wire.ProduceRequest{Topic: genName(t, "topic"), TopicID: genID(t, "id"),
				Partition: rapid.Uint32().Draw(t, "partition"), Batch: genBatches(t)}
		}), zeroOf[wire.ProduceRequest]()},
		{"ProduceReply", custom(func(t *rapid.T) *wire.ProduceReply {
			return &wire.ProduceReply{BaseOffset: rapid.Uint64().Draw(t, "base"), LastOffset: rapid.Uint64().Draw(t, "last"),
				AppendTime: rapid.Int64().Draw(t, "append time"), Duplicate: rapid.Bool().Draw(t, "duplicate")}
		}), zeroOf[wire.ProduceReply]()},
		{"AttachConsumerRequest", custom(func(t *rapid.T) *wire.AttachConsumerRequest {
			return &wire.AttachConsumerRequest{Topic: genName(t, "topic"), Name: genName(t, "name")}
		}), zeroOf[wire.AttachConsumerRequest]()},
		{"AttachConsumerReply", custom(func(t *rapid.T) *wire.AttachConsumerReply {
			return &wire.AttachConsumerReply{TopicID: genID(t, "id"), Session: rapid.Uint64().Draw(t, "session")}
		}), zeroOf[wire.AttachConsumerReply]()},
		{"PollRequest", custom(genPollRequest), zeroOf[wire.PollRequest]()},
		{"PollReply", custom(genPollReply), zeroOf[wire.PollReply]()},
		{"CommitRequest", custom(func(t *rapid.T) *wire.CommitRequest {
			return &wire.CommitRequest{Consumer: genConsumer(t), Offsets: genSlice(t, 4, "offsets", func(t *rapid.T) wire.CommitOffset {
				return wire.CommitOffset{Topic: genName(t, "topic"), Partition: rapid.Uint32().Draw(t, "partition"),
					Offset: rapid.Uint64().Draw(t, "offset"), Token: genToken(t)}
			})}
		}), zeroOf[wire.CommitRequest]()},
		{"CommitReply", custom(func(t *rapid.T) *wire.CommitReply {
			return &wire.CommitReply{Partitions: genSlice(t, 4, "results", genOffsetResult)}
		}), zeroOf[wire.CommitReply]()},
		{"ResetPositionRequest", custom(func(t *rapid.T) *wire.ResetPositionRequest {
			return &wire.ResetPositionRequest{Consumer: genConsumer(t), Partitions: genSlice(t, 4, "partitions", func(t *rapid.T) wire.ResetPartition {
				return wire.ResetPartition{Topic: genName(t, "topic"), Partition: rapid.Uint32().Draw(t, "partition"),
					Position: genPosition(t), Token: genToken(t)}
			})}
		}), zeroOf[wire.ResetPositionRequest]()},
		{"ResetPositionReply", custom(func(t *rapid.T) *wire.ResetPositionReply {
			return &wire.ResetPositionReply{Partitions: genSlice(t, 4, "results", genOffsetResult)}
		}), zeroOf[wire.ResetPositionReply]()},
		{"GetCommittedRequest", custom(func(t *rapid.T) *wire.GetCommittedRequest {
			return &wire.GetCommittedRequest{Consumer: genConsumer(t), Partitions: genSlice(t, 4, "partitions", func(t *rapid.T) wire.TopicPartition {
				return wire.TopicPartition{Topic: genName(t, "topic"), Partition: rapid.Uint32().Draw(t, "partition")}
			})}
		}), zeroOf[wire.GetCommittedRequest]()},
		{"GetCommittedReply", custom(func(t *rapid.T) *wire.GetCommittedReply {
			return &wire.GetCommittedReply{Partitions: genSlice(t, 4, "partitions", func(t *rapid.T) wire.Committed {
				c := wire.Committed{Status: genStatus(t), Message: genText(t, "message"), HasOffset: rapid.Bool().Draw(t, "has"),
					History: rapid.Uint64().Draw(t, "history"), Token: genToken(t)}
				if c.HasOffset {
					c.Offset = rapid.Uint64().Draw(t, "offset")
				}
				return c
			})}
		}), zeroOf[wire.GetCommittedReply]()},
		{"CreateTokenRequest", custom(func(t *rapid.T) *wire.CreateTokenRequest {
			return &wire.CreateTokenRequest{Label: genName(t, "label"), Topic: genName(t, "topic"), Scopes: genScope(t),
				ExpiresAt: rapid.Int64().Draw(t, "expires")}
		}), zeroOf[wire.CreateTokenRequest]()},
		{"CreateTokenReply", custom(func(t *rapid.T) *wire.CreateTokenReply {
			return &wire.CreateTokenReply{Token: genTokenInfo(t), Secret: rapid.StringN(0, 64, wire.MaxAuthTokenLen).Draw(t, "secret")}
		}), zeroOf[wire.CreateTokenReply]()},
		{"ListTokensRequest", rapid.Just[wire.Message](&wire.ListTokensRequest{}),
			zeroOf[wire.ListTokensRequest]()},
		{"ListTokensReply", custom(func(t *rapid.T) *wire.ListTokensReply {
			return &wire.ListTokensReply{Tokens: genSlice(t, 4, "tokens", genTokenInfo)}
		}), zeroOf[wire.ListTokensReply]()},
		{"RevokeTokenRequest", custom(func(t *rapid.T) *wire.RevokeTokenRequest {
			return &wire.RevokeTokenRequest{ID: genName(t, "id")}
		}), zeroOf[wire.RevokeTokenRequest]()},
		{"RevokeTokenReply", rapid.Just[wire.Message](&wire.RevokeTokenReply{}),
			zeroOf[wire.RevokeTokenReply]()},
	}
}

func genOffsetResult(t *rapid.T) wire.OffsetResult {
	return wire.OffsetResult{Status: genStatus(t), Message: genText(t, "message"), Offset: rapid.Uint64().Draw(t, "offset")}
}

func genPollRequest(t *rapid.T) *wire.PollRequest {
	return &wire.PollRequest{
		Consumer:    genConsumer(t),
		MaxWait:     genDuration(t, "max wait"),
		MaxMessages: rapid.Uint32().Draw(t, "max messages"),
		MaxBytes:    rapid.Uint32().Draw(t, "max bytes"),
		AutoCommit:  wire.AutoCommit(rapid.IntRange(0, 2).Draw(t, "auto commit")),
		Filter: wire.Filter{
			Name: genName(t, "filter"),
			Params: genSlice(t, 3, "params", func(t *rapid.T) wire.FilterParam {
				return wire.FilterParam{Key: genName(t, "key"), Value: genText(t, "value")}
			}),
		},
		Partitions: genSlice(t, 4, "partitions", func(t *rapid.T) wire.PollPartition {
			return wire.PollPartition{Topic: genName(t, "topic"), TopicID: genID(t, "id"),
				Partition: rapid.Uint32().Draw(t, "partition"), Position: genPosition(t),
				MaxBytes: rapid.Uint32().Draw(t, "max bytes")}
		}),
		Key: genPollKey(t),
	}
}

func genPollKey(t *rapid.T) wire.PollKey {
	mode := wire.KeyMode(rapid.IntRange(0, 2).Draw(t, "key mode"))
	if mode == wire.KeyAny {
		return wire.PollKey{}
	}
	return wire.PollKey{Mode: mode, Key: rapid.SliceOfN(rapid.Byte(), 1, 40).Draw(t, "key")}
}

func genPollReply(t *rapid.T) *wire.PollReply {
	return &wire.PollReply{Partitions: genSlice(t, 4, "partitions", func(t *rapid.T) wire.PollPartitionReply {
		return wire.PollPartitionReply{
			Status:        genStatus(t),
			Message:       genText(t, "message"),
			TopicID:       genID(t, "id"),
			History:       rapid.Uint64().Draw(t, "history"),
			StartOffset:   rapid.Uint64().Draw(t, "start"),
			HighWatermark: rapid.Uint64().Draw(t, "hw"),
			Next:          rapid.Uint64().Draw(t, "next"),
			Token:         genToken(t),
			Payload:       wire.PayloadKind(rapid.IntRange(0, 1).Draw(t, "payload")),
			Batches:       genBatches(t),
		}
	})}
}

// allStatuses lists every status of version 1.
func allStatuses() []wire.Status {
	return []wire.Status{
		wire.StatusOK, wire.StatusMalformedRequest, wire.StatusUnsupportedVersion, wire.StatusUnknownKind,
		wire.StatusMessageTooLarge, wire.StatusInvalidArgument, wire.StatusInternal, wire.StatusBusy,
		wire.StatusTimeout, wire.StatusShuttingDown, wire.StatusUnauthenticated, wire.StatusForbidden,
		wire.StatusUnknownToken, wire.StatusUnknownTopic, wire.StatusTopicExists, wire.StatusUnknownPartition,
		wire.StatusNotEnoughSpace, wire.StatusPartitionFailed, wire.StatusInvalidBatch,
		wire.StatusStaleHistory, wire.StatusTopicRecreated, wire.StatusFencedProducer, wire.StatusUnknownProducer,
		wire.StatusOutOfOrderSequence, wire.StatusDuplicateSequence, wire.StatusFencedSession,
		wire.StatusUnknownSession, wire.StatusFencedMember, wire.StatusStaleMemberEpoch, wire.StatusUnknownMember,
		wire.StatusUnassignedPartition, wire.StatusOffsetOutOfRange, wire.StatusCommitBackwards,
		wire.StatusTokenRequired, wire.StatusTokenMismatch, wire.StatusNotDelivered, wire.StatusMalformedToken,
		wire.StatusUnknownHistory,
		wire.StatusUnknownPlugin, wire.StatusPluginTimeout, wire.StatusPluginTrap, wire.StatusPluginInvalidAnswer,
		wire.StatusPluginError, wire.StatusPluginQuarantined, wire.StatusPluginBusy, wire.StatusPluginLoading,
		wire.StatusPluginMemoryLimit,
	}
}
