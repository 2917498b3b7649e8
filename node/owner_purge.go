package node

import (
	"context"
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
	return o.facts(), nil
}

// EnforceRetention applies the topic's retention at time now. It raises the
// log start offset and never changes the history epoch: tokens stay valid,
// and a consumer whose position fell below the start follows its reset
// policy.
func (o *Owner) EnforceRetention(now time.Time) error {
	if err := o.refuseClosed(); err != nil {
		return err
	}
	return o.log.EnforceRetention(now)
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

// Unassign removes a group's assignment of this partition (the revocation
// was confirmed or the member's session expired). From then on no member of
// the group may poll or commit it until it is assigned again.
func (o *Owner) Unassign(group string) {
	o.mu.Lock()
	delete(o.assignments, group)
	o.mu.Unlock()
}
