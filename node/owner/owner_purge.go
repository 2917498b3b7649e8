package owner

import (
	"context"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
)

// Purge removes every record of the partition: the log start rises to the
// high watermark and the history epoch is bumped, in one synced write.
// Offsets are never reused, and producer state is kept. Work created before
// the purge — reads in flight, parked polls, queued auto-commits, tokens
// held by clients — is refused from then on (fence.ErrStaleHistory), and
// consumers resume at the new log start.
//
// The owner's lock is not held: the purge is ordered by the log, and every
// owner step compares the tokens it handles with the log's state at that
// step, so an effect either lands before the purge (and is purged with its
// history) or is checked against the new history.
func (o *Owner) Purge(ctx context.Context) (PartitionState, error) {
	if err := o.refuseClosed(); err != nil {
		return PartitionState{}, err
	}
	if err := ctx.Err(); err != nil {
		return PartitionState{}, err
	}
	if _, err := o.log.Purge(); err != nil {
		return PartitionState{}, err
	}
	// Parked key polls wait for their keys only: wake them to meet the
	// new history, as the change of the log wakes the others.
	o.keys.wakeAll()
	return o.facts(), nil
}

// EnforceRetention applies the topic's retention at time now. It raises the
// log start offset and never changes the history epoch: tokens stay valid,
// and a consumer whose position fell below the start follows its reset
// policy. Records at or above the floor of OwnerConfig.RetentionFloor are
// kept; the result, and RetentionHold, say what the floor held back.
func (o *Owner) EnforceRetention(now time.Time) (RetentionResult, error) {
	if err := o.refuseClosed(); err != nil {
		return RetentionResult{}, err
	}
	floor := NoRetentionFloor
	if o.retentionFloor != nil {
		if f, ok := o.retentionFloor(); ok {
			floor = f
		}
	}
	res, err := o.log.EnforceRetention(now, floor)
	if err != nil {
		return res, err
	}
	o.hold.note(res)
	return res, nil
}

// RetentionHold is what a retention floor (an uplink under the block
// overflow policy) keeps on a partition that retention would have deleted.
type RetentionHold struct {
	// Held: the last enforcement was held back; Floor, Wanted and
	// HeldBytes describe it (Wanted is the log start retention alone would
	// have set).
	Held      bool
	Floor     uint64
	Wanted    uint64
	HeldBytes int64
	// Times counts the enforcements held back since the owner started.
	Times uint64
}

// retentionHold is the owner's record of what its floor held back.
type retentionHold struct {
	mu sync.Mutex
	h  RetentionHold
}

func (r *retentionHold) note(res RetentionResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Held = res.HeldBack()
	if !r.h.Held {
		r.h.Floor, r.h.Wanted, r.h.HeldBytes = 0, 0, 0
		return
	}
	r.h.Floor, r.h.Wanted, r.h.HeldBytes = res.Floor, res.Wanted, res.HeldBytes
	r.h.Times++
}

// RetentionHold returns what the retention floor held back at the last
// enforcement, and how often it did.
func (o *Owner) RetentionHold() RetentionHold {
	o.hold.mu.Lock()
	defer o.hold.mu.Unlock()
	return o.hold.h
}

// Assign installs a group's assignment of this partition to member, which
// received it at assignmentEpoch. It is an owner step, so commits and the
// move of the partition are ordered: a commit checked before it ran under
// the old assignment, every commit after it under the new one.
func (o *Owner) Assign(group, member string, assignmentEpoch fence.MemberEpoch) {
	o.mu.Lock()
	o.assignments[group] = assignment{member: member, assignmentEpoch: assignmentEpoch}
	o.mu.Unlock()
}

// Assignment returns the member a group's assignment of this partition
// names and the assignment epoch it received it at; ok is false when the
// group holds no assignment of it.
func (o *Owner) Assignment(group string) (member string, assignmentEpoch fence.MemberEpoch, ok bool) {
	o.mu.Lock()
	a, ok := o.assignments[group]
	o.mu.Unlock()
	return a.member, a.assignmentEpoch, ok
}

// Unassign removes a group's assignment of this partition (the revocation
// was confirmed or the member's session expired). From then on no member of
// the group may poll or commit it until it is assigned again.
func (o *Owner) Unassign(group string) {
	o.mu.Lock()
	delete(o.assignments, group)
	o.mu.Unlock()
}
