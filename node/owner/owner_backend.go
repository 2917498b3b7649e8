package owner

import (
	"context"
	"math"
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

// NoRetentionFloor is the retention floor that holds nothing back.
const NoRetentionFloor uint64 = math.MaxUint64

// RetentionResult is what one enforcement of a partition's retention did.
type RetentionResult struct {
	// LogStart is the log start after it.
	LogStart uint64
	// Floor is the floor it was given (NoRetentionFloor: none).
	Floor uint64
	// Wanted is the log start retention alone would have set: above
	// LogStart when the floor kept records retention would have deleted.
	Wanted uint64
	// HeldBytes is the size of what the floor kept.
	HeldBytes int64
}

// HeldBack reports whether the floor kept records that retention would
// have deleted.
func (r RetentionResult) HeldBack() bool { return r.Wanted > r.LogStart }

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
	// Release, when set, gives the batches' memory back to the storage
	// engine; nothing may use them afterwards. Calling it is optional.
	Release func()
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
	// never changes the history epoch and never removes a record at or
	// above floor (NoRetentionFloor: no floor).
	EnforceRetention(now time.Time, floor uint64) (RetentionResult, error)
	// Bookmark returns the consumer's stored bookmark.
	Bookmark(consumer string) (Bookmark, bool, error)
	// SetBookmark orders a write of the consumer's bookmark.
	SetBookmark(consumer string, b Bookmark) (Ticket, error)
	// SetBookmarkState orders one write of the consumer's bookmark and
	// the changes to its state store, in order: all of it or nothing.
	SetBookmarkState(consumer string, b Bookmark, changes []StateChange) (Ticket, error)
	// ScanState calls fn for every key of the consumer's state store that
	// starts with prefix, in key order, from one consistent view. The
	// slices are valid only during the call.
	ScanState(consumer string, prefix []byte, fn func(k, v []byte) error) error
	// DeleteConsumer orders one write removing the consumer's bookmark and
	// its whole state store.
	DeleteConsumer(consumer string) (Ticket, error)
}

// Metadata is the node's ordered key-value store beside the logs (the
// engine's pebble). Put orders a write without waiting; Sync waits for
// durability of everything ordered up to a ticket, so many writes share one
// sync. Tickets of Put and PartitionLog's writes are one sequence.
type Metadata interface {
	Get(key []byte) (value []byte, ok bool, err error)
	Put(key, value []byte) (Ticket, error)
	Sync(ctx context.Context, t Ticket) error
	// Scan calls fn for every key with the prefix, in key order.
	Scan(prefix []byte, fn func(key, value []byte) error) error
}
