package owner

import (
	"context"

	"github.com/ledgemq/ledge/fence"
)

// CommitRequest commits (or, for Reset, seeks to) Offset — the next offset
// the consumer will read — under the token of the poll or position it
// derives from.
type CommitRequest struct {
	Consumer Consumer
	Token    fence.Token
	Offset   uint64
}

// Commit records the consumer's progress and returns once it is durable:
// OrderCommit, then the wait for durability. The token must be current
// (same topic, history, session or assignment), the offset within what the
// token delivered and within [log start, high watermark], and not below
// the committed offset. Otherwise nothing changes and the error is a fence
// rejection saying what to do.
func (o *Owner) Commit(ctx context.Context, req CommitRequest) error {
	d, err := o.OrderCommit(ctx, req)
	if err != nil {
		return err
	}
	return d.Wait(ctx)
}

// OrderCommit is the ordering half of Commit: it checks the commit and
// orders the write of the bookmark in one owner step, and returns at once
// with the Durable that says when the commit is durable. A later step of
// the owner sees the new committed offset; the commit must not be
// acknowledged before the Durable's Wait returned nil.
func (o *Owner) OrderCommit(ctx context.Context, req CommitRequest) (Durable, error) {
	return o.orderCommit(ctx, req, false, nil)
}

// Reset seeks the consumer to Offset and commits it, backwards if need be,
// and returns once the commit is durable. The token must be current; the
// offset within [log start, high watermark]. The consumer's next poll
// "next" reads from Offset.
func (o *Owner) Reset(ctx context.Context, req CommitRequest) error {
	d, err := o.OrderReset(ctx, req)
	if err != nil {
		return err
	}
	return d.Wait(ctx)
}

// OrderReset is the ordering half of Reset, as OrderCommit is Commit's.
func (o *Owner) OrderReset(ctx context.Context, req CommitRequest) (Durable, error) {
	return o.orderCommit(ctx, req, true, nil)
}

// orderCommit checks a commit (or a reset) and orders its write. With
// state changes (OrderCommitState), the bookmark and the changes are one
// write; a rejected commit writes neither.
func (o *Owner) orderCommit(ctx context.Context, req CommitRequest, reset bool, changes []StateChange) (Durable, error) {
	if err := ctx.Err(); err != nil {
		return Durable{}, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.refuseClosed(); err != nil {
		return Durable{}, err
	}
	pr := o.progressOf(req.Consumer)
	if pr == nil {
		return Durable{}, ErrNoConsumer
	}
	p := o.facts()
	h := o.holder(req.Consumer)
	var err error
	if reset {
		err = fence.CheckReset(p, h, req.Token, req.Offset)
	} else {
		var floor uint64
		if floor, err = o.committedFloor(p, pr); err == nil {
			err = fence.CheckCommit(p, h, req.Token, req.Offset, floor)
		}
	}
	if err != nil {
		return Durable{}, err
	}
	d, err := o.setCommitted(pr, Bookmark{Offset: req.Offset, History: p.History}, changes...)
	if err != nil {
		return Durable{}, err
	}
	if reset {
		pr.delivered = fence.Issue(p, h, req.Offset)
	}
	return d, nil
}

// Progress is a consumer's progress on the partition.
type Progress struct {
	// Committed is the stored bookmark, if HasCommitted.
	Committed    Bookmark
	HasCommitted bool
	// Resolved is the bookmark resolved in the current history.
	Resolved fence.Resolution
	// Next is where a poll "next" with ResetEarliest would start now.
	Next uint64
	// Token is a token of the consumer's current world with the empty
	// range at Next: what a Reset needs when no poll was made yet.
	Token fence.Token
	// State is the partition's state.
	State PartitionState
}

// Committed returns the consumer's progress. It changes nothing, except
// that a delivered position found stale is forgotten.
func (o *Owner) Committed(ctx context.Context, c Consumer) (Progress, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.refuseClosed(); err != nil {
		return Progress{}, err
	}
	pr := o.progressOf(c)
	if pr == nil {
		return Progress{}, ErrNoConsumer
	}
	p := o.facts()
	h := o.holder(c)
	if err := o.checkRequester(c, h); err != nil {
		return Progress{}, err
	}
	res, ok, err := o.resolveCommitted(p, pr)
	if err != nil {
		return Progress{}, err
	}
	next, err := o.nextPosition(p, h, pr, ResetEarliest)
	if err != nil {
		return Progress{}, err
	}
	return Progress{
		Committed: pr.committed, HasCommitted: ok, Resolved: res,
		Next: next, Token: fence.Issue(p, h, next), State: p,
	}, nil
}

// ObserveCommitted returns the named consumer's committed offset as it is,
// for a reader that does not act as the consumer: no session is checked,
// no token issued and no progress created. It is read in one owner step,
// so it includes every commit the owner ordered.
func (o *Owner) ObserveCommitted(ctx context.Context, name string) (Progress, error) {
	if err := ctx.Err(); err != nil {
		return Progress{}, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.refuseClosed(); err != nil {
		return Progress{}, err
	}
	pr, ok := o.consumers[name]
	if !ok {
		pr = &progress{key: consumerBookmarkKey(name)}
	}
	if err := o.loadCommitted(pr); err != nil {
		return Progress{}, err
	}
	return Progress{Committed: pr.committed, HasCommitted: pr.hasCommitted}, nil
}
