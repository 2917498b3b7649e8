package node

import (
	"context"
	"time"

	"github.com/ledgemq/ledge/fence"
)

// LogState is a partition's state as its log reports it.
type LogState struct {
	LogStart      uint64 // first offset readers may see
	HighWatermark uint64 // exclusive end of what readers may see
	History       fence.HistoryEpoch
	// Failed, when non-nil, says the partition refuses appends until the
	// node reopens it.
	Failed error
}

// Bookmark is a consumer's committed offset on a partition, stamped with
// the history epoch it was committed in.
type Bookmark struct {
	Offset  uint64
	History fence.HistoryEpoch
}

// ReadResult is what a read returns: immutable whole batches and the
// position after them.
type ReadResult struct {
	Batches [][]byte
	Next    uint64
}

// ReadPlan is a read planned on the owner and executed anywhere. It holds
// only immutable inputs; executing it changes nothing.
type ReadPlan interface {
	Execute(ctx context.Context) (ReadResult, error)
	Release()
}

// Ticket orders a metadata write; Metadata.Sync(ctx, t) returns once every
// write ordered up to t is durable.
type Ticket uint64

// PartitionLog is what an owner needs of its partition of the storage
// engine. Appends and bookmark writes are ordered at once and made durable
// later (WaitDurable, Metadata.Sync), so the owner orders effects under its
// lock and waits outside it.
type PartitionLog interface {
	State() LogState
	// Lineage returns how each history epoch began, in increasing order,
	// ending with the current epoch.
	Lineage() []fence.HistoryTransition
	// Append validates and appends a batch, returning the offsets of its
	// first and last record. The batch then belongs to the log. A batch of
	// an idempotent producer also updates the producer's state (undone if
	// the append fails before it is durable).
	Append(batch []byte) (base, last uint64, err error)
	// ProducerState returns the producer's state on this partition,
	// including batches appended but not yet durable; false if it never
	// appended here. It survives purge and restart; a lossy recovery
	// forgets the batches it lost.
	ProducerState(id fence.ProducerID) (fence.ProducerState, bool)
	// WaitDurable returns once every offset <= off is durable per the
	// topic's policy, or the partition failed.
	WaitDurable(ctx context.Context, off uint64) error
	// Changed returns a channel closed at the next change of the high
	// watermark or the partition's state.
	Changed() <-chan struct{}
	// PlanRead plans a read of up to maxBytes (at least one batch) from
	// offset from, which lies in [log start, high watermark).
	PlanRead(from uint64, maxBytes int) (ReadPlan, error)
	// Purge raises the log start to the high watermark and bumps the
	// history epoch in one synced write.
	Purge() (LogState, error)
	// EnforceRetention raises the log start per the retention policy; it
	// never changes the history epoch.
	EnforceRetention(now time.Time) error
	// Bookmark returns the consumer's stored bookmark.
	Bookmark(consumer string) (Bookmark, bool, error)
	// SetBookmark orders a write of the consumer's bookmark.
	SetBookmark(consumer string, b Bookmark) (Ticket, error)
}

// Metadata is the node's ordered key-value store beside the logs (the
// engine's pebble). Put orders a write without waiting; Sync waits for
// durability of everything ordered up to a ticket, so many writes share one
// sync. Tickets of Put and PartitionLog.SetBookmark are one sequence.
type Metadata interface {
	Get(key []byte) (value []byte, ok bool, err error)
	Put(key, value []byte) (Ticket, error)
	Sync(ctx context.Context, t Ticket) error
	// Scan calls fn for every key with the prefix, in key order.
	Scan(prefix []byte, fn func(key, value []byte) error) error
}
