package sdk

import (
	"fmt"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// Consumer defaults.
const (
	// DefaultMaxWait is how long a poll waits for records when none are
	// there.
	DefaultMaxWait = time.Second
	// DefaultMaxMessages bounds the records of one poll.
	DefaultMaxMessages = 10000
	// DefaultMaxPollBytes bounds the bytes of one poll.
	DefaultMaxPollBytes = 4 << 20
)

// Position is where a consumer reads from on a partition.
type Position struct {
	mode   wire.PositionMode
	offset uint64
	ts     int64
}

// AtOffset is the record at offset o (or the next one after it, where
// records were removed).
func AtOffset(o uint64) Position { return Position{mode: wire.PositionOffset, offset: o} }

// AtTime is the first record whose timestamp is at t or later.
func AtTime(t time.Time) Position {
	return Position{mode: wire.PositionTimestamp, ts: t.UnixMilli()}
}

// AtFirst is the partition's first record (its start offset).
func AtFirst() Position { return Position{mode: wire.PositionFirst} }

// AtLast is the partition's last record, or the end when it is empty.
func AtLast() Position { return Position{mode: wire.PositionLast} }

// AtEnd is past the last record: only records produced from now on.
func AtEnd() Position { return Position{mode: wire.PositionEnd} }

// AtCommitted is a named consumer's committed position: where it left off
// (after a purge, the partition's new start). Without a committed offset,
// the reset policy decides.
func AtCommitted() Position { return Position{mode: wire.PositionNext} }

// String describes the position: "offset 42", "first", "time 2026-...".
func (p Position) String() string {
	switch p.mode {
	case wire.PositionOffset:
		return fmt.Sprintf("offset %d", p.offset)
	case wire.PositionTimestamp:
		return "time " + time.UnixMilli(p.ts).UTC().Format(time.RFC3339Nano)
	case wire.PositionNext:
		return "committed"
	}
	return p.mode.String()
}

func (p Position) wire(reset ResetPolicy) wire.Position {
	w := wire.Position{Mode: p.mode, Reset: reset.mode()}
	switch p.mode {
	case wire.PositionOffset:
		w.Offset = p.offset
	case wire.PositionTimestamp:
		w.Timestamp = p.ts
	}
	return w
}

// ResetPolicy says where a consumer goes when its position is outside the
// partition (retention removed the records) or it has no committed
// position.
type ResetPolicy uint8

// Reset policies.
const (
	// ResetEarliest goes to the partition's first record.
	ResetEarliest ResetPolicy = iota
	// ResetLatest goes to the end: only new records.
	ResetLatest
	// ResetNone fails the poll with ErrOffsetOutOfRange.
	ResetNone
)

func (r ResetPolicy) mode() wire.PositionMode {
	switch r {
	case ResetLatest:
		return wire.PositionEnd
	case ResetNone:
		return 0
	}
	return wire.PositionFirst
}

// AutoCommit says whether a named consumer's polls commit by themselves.
type AutoCommit = wire.AutoCommit

// Automatic commit modes.
const (
	// AutoCommitNone commits only through Commit and CommitPolled.
	AutoCommitNone = wire.AutoCommitNone
	// AutoCommitOnDelivery (at most once): what a poll returns is committed
	// as the node sends it. A crash loses what was not processed yet.
	AutoCommitOnDelivery = wire.AutoCommitOnDelivery
	// AutoCommitOnNextPoll (at least once): each poll commits what the
	// previous poll returned, fenced by that poll's token, and Close
	// commits the last one. A crash processes the last poll again.
	AutoCommitOnNextPoll = wire.AutoCommitOnNextPoll
)

// ConsumerOption configures a Consumer (see Client.NewConsumer).
type ConsumerOption interface{ applyConsumer(*consumerConfig) }

type consumerOption func(*consumerConfig)

func (f consumerOption) applyConsumer(c *consumerConfig) { f(c) }

type consumerConfig struct {
	name          string
	partitions    []int32
	start         Position
	startSet      bool
	reset         ResetPolicy
	autoCommit    AutoCommit
	autoCommitSet bool
	maxWait       time.Duration
	maxMessages   int
	maxBytes      int
	prefetch      bool
	filter        wire.Filter  // WithFilter
	commitPolicy  *wire.Filter // WithCommitPolicy
	key           wire.PollKey // WithKey, WithKeyPrefix
}

func defaultConsumerConfig() consumerConfig {
	return consumerConfig{
		maxWait:     DefaultMaxWait,
		maxMessages: DefaultMaxMessages,
		maxBytes:    DefaultMaxPollBytes,
		prefetch:    true,
	}
}

// WithConsumerName makes a named consumer: the node keeps its committed
// positions under name, and NewConsumer attaches a session under it. A
// second process attaching under the same name fences this one: its
// polls and commits fail with ErrFencedSession from then on.
//
// Default: anonymous (reads by position, cannot commit). Names are at
// most 255 bytes.
func WithConsumerName(name string) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.name = name })
}

// WithPartitions reads only the given partitions.
//
// Default: every partition of the topic.
func WithPartitions(partitions ...int32) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.partitions = append([]int32(nil), partitions...) })
}

// WithStart sets where each partition is read from at first.
//
// Default: AtCommitted() for a named consumer (resume where it left off),
// AtFirst() for an anonymous one. Seek changes it per partition later.
func WithStart(p Position) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.start, c.startSet = p, true })
}

// WithResetPolicy sets where to go when a position is outside the
// partition, or a named consumer has no committed position.
//
// Default ResetEarliest.
func WithResetPolicy(r ResetPolicy) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.reset = r })
}

// WithAutoCommit sets a named consumer's automatic commits.
//
// Default AutoCommitNone: commit with Commit or CommitPolled. Anonymous
// consumers cannot commit; for them any other mode fails NewConsumer.
func WithAutoCommit(m AutoCommit) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.autoCommit, c.autoCommitSet = m, true })
}

// WithMaxWait sets how long the node holds a poll that finds no records
// before answering with none (a long poll). It answers as soon as records
// arrive. A poll still unanswered a second past it sends the node one
// small request, so that a node killed and started again meanwhile
// answers with a stateless reset and Poll fails at once as a reset
// connection (the next Poll reconnects), rather than after the request
// timeout (WithRequestTimeout) on top of the max wait.
//
// Default 1 s. Zero or negative answers at once.
func WithMaxWait(d time.Duration) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.maxWait = max(d, 0) })
}

// WithMaxMessages bounds the records of one poll. The node returns whole
// batches, so a poll may hold up to one batch more.
//
// Default 10000. Values below 1 keep the default.
func WithMaxMessages(n int) ConsumerOption {
	return consumerOption(func(c *consumerConfig) {
		if n > 0 {
			c.maxMessages = n
		}
	})
}

// WithMaxBytes bounds the bytes of one poll. The node returns at least one
// whole batch when one is there, however large.
//
// Default 4 MiB. Values below 1 keep the default.
func WithMaxBytes(n int) ConsumerOption {
	return consumerOption(func(c *consumerConfig) {
		if n > 0 {
			c.maxBytes = n
		}
	})
}

// WithPrefetch sends the next poll as soon as a poll's reply arrives,
// from where that reply ends, so the node reads and sends while the
// application processes: Poll then returns what arrived meanwhile. A
// consumer of one partition sends it earlier still, as soon as the start
// of a large reply says where the partition continues, so the node's next
// reply follows this one without a round trip between them. A Seek
// wastes the poll sent ahead for its partition (the next Poll returns
// nothing for it, the one after reads from the new position).
//
// Default on. It applies only with AutoCommitNone: with automatic commits
// a poll sent ahead would commit records before the application saw them.
func WithPrefetch(on bool) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.prefetch = on })
}
