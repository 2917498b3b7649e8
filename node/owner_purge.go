package node

import (
	"context"
	"time"

	"github.com/ledgemq/ledge/fence"
)

// Purge removes every record of the partition: the log start rises to the
// high watermark and the history epoch is bumped, in one synced write.
// Offsets are never reused. Work created before the purge — reads in
// flight, parked polls, queued auto-commits, tokens held by clients — is
// refused from then on (fence.ErrStaleHistory); consumers resume at the new
// log start. Producer state is kept: it is snapshotted and synced first, and
// appends wait until the purge is done so none falls between the snapshot
// and the purge.
func (o *Owner) Purge(ctx context.Context) (PartitionState, error) {
	o.purgeMu.Lock()
	defer o.purgeMu.Unlock()

	o.mu.Lock()
	done := make(chan struct{})
	o.purging = done
	t, err := o.snapshotProducers()
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.purging = nil
		close(done)
		o.mu.Unlock()
	}()
	if err != nil {
		return PartitionState{}, err
	}
	if err := o.meta.Sync(ctx, t); err != nil {
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
	return o.log.EnforceRetention(now)
}

// Close snapshots the producer state so the next open replays little, and
// waits for it to be durable.
func (o *Owner) Close(ctx context.Context) error {
	o.mu.Lock()
	t, err := o.snapshotProducers()
	o.mu.Unlock()
	if err != nil {
		return err
	}
	return o.meta.Sync(ctx, t)
}

// Assign installs a group's assignment of this partition to member, which
// received it at assignmentEpoch. It is an owner step, so commits and the
// move of the partition are ordered: a commit checked before it ran under
// the old assignment, every commit after it under the new one.
func (o *Owner) Assign(group, member string, assignmentEpoch fence.MemberEpoch) {
	o.mu.Lock()
	o.assignments[group] = assignment{member: member, memberHash: fence.NameHash(member), assignmentEpoch: assignmentEpoch}
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
