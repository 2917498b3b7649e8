package node

import (
	"context"
	"sync"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// Storage is where a Node keeps its topics, their partition logs and its
// metadata: the storage engine under the data directory in production
// (Config.Storage nil), an in-memory model in tests and simulations.
type Storage interface {
	// Metadata is the node's ordered key-value store (tokens, producer
	// registry, consumer sessions, owner snapshots).
	Metadata() Metadata
	// Topics returns every topic, with its partition logs.
	Topics() ([]StoredTopic, error)
	// CreateTopic creates a topic with a new, random id. A zero field of
	// cfg takes the storage's default, except the retention limits (zero
	// keeps forever); the returned topic carries the effective values.
	// A name in use fails with an error matching ErrTopicExists.
	CreateTopic(name string, cfg wire.TopicConfig) (StoredTopic, error)
	// DeleteTopic deletes the topic with that name and id: its logs,
	// bookmarks and producer state.
	DeleteTopic(name string, id fence.TopicID) error
	// Close shuts the storage down cleanly.
	Close() error
}

// StoredTopic is a topic as storage holds it.
type StoredTopic struct {
	Name   string
	ID     fence.TopicID
	Config wire.TopicConfig
	// Partitions are the topic's logs, by index.
	Partitions []PartitionLog
}

// orderKey carries a request's orderSignal in its context.
type orderKey struct{}

// orderSignal says that a request's effects are ordered: what it changes is
// decided, in the owner's order, and all that is left is to wait for
// durability. The stream that carries the request starts the next request
// then, so that produce N+1 is appended while N waits for its fsync, and
// still after N.
type orderSignal struct {
	once sync.Once
	ch   chan struct{}
}

func newOrderSignal() *orderSignal { return &orderSignal{ch: make(chan struct{})} }

func (s *orderSignal) fire() { s.once.Do(func() { close(s.ch) }) }

// withOrderSignal returns ctx carrying s.
func withOrderSignal(ctx context.Context, s *orderSignal) context.Context {
	return context.WithValue(ctx, orderKey{}, s)
}

// markOrdered fires ctx's order signal, if it carries one.
func markOrdered(ctx context.Context) {
	if s, ok := ctx.Value(orderKey{}).(*orderSignal); ok {
		s.fire()
	}
}

// orderedLog is a partition log that reports the start of every
// durability wait to the waiting request's stream. The owner orders an
// append under its lock and waits for its durability outside the lock
// (PartitionLog, Metadata): entering the wait is the moment the request is
// ordered.
type orderedLog struct{ PartitionLog }

// WaitDurable implements PartitionLog.
func (l orderedLog) WaitDurable(ctx context.Context, off uint64) error {
	markOrdered(ctx)
	return l.PartitionLog.WaitDurable(ctx, off)
}

// orderedMeta is orderedLog's counterpart for metadata syncs (commits).
type orderedMeta struct{ Metadata }

// Sync implements Metadata.
func (m orderedMeta) Sync(ctx context.Context, t Ticket) error {
	markOrdered(ctx)
	return m.Metadata.Sync(ctx, t)
}
