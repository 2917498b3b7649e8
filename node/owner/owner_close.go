package owner

import (
	"context"
	"fmt"
	"sync"

	"github.com/ledgemq/ledge/fence"
)

// ErrOwnerClosed: the partition's owner was closed (the node is shutting
// down). Nothing was done; retry on a node that serves the partition. It
// matches ErrShuttingDown.
var ErrOwnerClosed = fmt.Errorf("%w: the partition owner is closed", ErrShuttingDown)

// Close is the owner's last step. From then on every step is refused with
// ErrOwnerClosed, and nothing the owner does changes the partition:
//
//   - parked polls (Poll, PollMany) wake and fail with ErrOwnerClosed;
//     polls whose read is in flight fail at their completion — no records,
//     no progress, no commit;
//   - queued automatic commits (commit-on-next-poll) are dropped, and so
//     are the delivered positions: a consumer resumes from its committed
//     offset, re-reading at most one poll (at least once);
//   - produces, commits, resets, purges and offset lookups are refused.
//
// Effects ordered before Close stay ordered: their Durables still report
// when they are durable, so the storage must be closed after they were
// waited for (or abandoned). Close waits for an append in progress to
// return from the log, or for ctx to end (then it returns ctx's error; the
// append is refused or ordered by the log as it closes). Close is
// idempotent.
func (o *Owner) Close(ctx context.Context) error {
	return o.closeWith(ctx, ErrOwnerClosed)
}

// CloseDeleted is Close for a partition whose topic was deleted: pending
// and later work fails with ErrTopicDeleted (not retryable) instead of
// the shutting-down error, so a client learns the topic is gone.
func (o *Owner) CloseDeleted(ctx context.Context) error {
	return o.closeWith(ctx, ErrTopicDeleted)
}

func (o *Owner) closeWith(ctx context.Context, reason error) error {
	o.mu.Lock()
	if !o.closed.Load() {
		o.closeReason = reason
		o.closed.Store(true)
		close(o.closing)
	}
	for _, m := range []map[string]*progress{o.consumers, o.groups} {
		for _, pr := range m {
			pr.delivered = fence.Token{}
		}
	}
	o.mu.Unlock()
	return waitUnlocked(ctx, &o.appendMu)
}

// refuseClosed returns ErrOwnerClosed once Close has begun. Called with
// o.mu or o.appendMu held.
func (o *Owner) refuseClosed() error {
	if o.closed.Load() {
		return o.closeReason
	}
	return nil
}

// waitUnlocked returns once mu is free (whoever held it let go), or with
// ctx's error.
func waitUnlocked(ctx context.Context, mu *sync.Mutex) error {
	if mu.TryLock() {
		mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	go func() {
		mu.Lock()
		close(done)
		mu.Unlock()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
