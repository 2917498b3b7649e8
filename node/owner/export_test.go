package owner

import (
	"context"

	"github.com/ledgemq/ledge/fence"
)

// What the owner's external tests reach of its insides.

// PendingPoll is a poll planned and not yet completed.
type PendingPoll = pendingPoll

// Token returns the token the pending poll was planned with.
func (p PendingPoll) Token() fence.Token { return p.tok }

// PlanPoll plans req as Poll does, leaving the read pending.
func (o *Owner) PlanPoll(req PollRequest) (PendingPoll, error) { return o.plan(req, nil) }

// CompletePoll reads and completes a pending poll.
func (o *Owner) CompletePoll(ctx context.Context, req PollRequest, p PendingPoll) (PollResult, error) {
	return o.readAndComplete(ctx, req, p)
}

// SetMembers replaces what the owner asks about group members.
func (o *Owner) SetMembers(m Members) {
	o.mu.Lock()
	o.members = m
	o.mu.Unlock()
}

// HasProgress reports whether the owner keeps progress for the group.
func (o *Owner) HasProgress(group string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.groups[group]
	return ok
}

// ProducerRegistry returns the registry the owner was built with.
func (o *Owner) ProducerRegistry() *Producers { return o.producers }

// SessionRegistry returns the registry the owner was built with.
func (o *Owner) SessionRegistry() *Sessions { return o.sessions }

// LogOf returns the owner's partition log.
func (o *Owner) LogOf() PartitionLog { return o.log }
