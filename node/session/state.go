package session

import (
	"context"
	"fmt"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// Fenced state over the wire (docs/PROTOCOL.md §17): GetState and
// CommitWithState, each on one partition through its owner.

// defaultStateReplyBytes bounds the entries of a GetState reply when the
// request names no bound; maxStateReplyBytes bounds it whatever the
// request says, well inside the default frame limit (one entry over it is
// still returned: at most a key and a value of their limits more).
const (
	defaultStateReplyBytes = 1 << 20
	maxStateReplyBytes     = 4 << 20
)

// GetState reads a consumer's state with its committed offset: a group
// member that holds the partition, a named consumer in its current
// session (consume scope on the topic), or an administrator inspecting a
// group (admin scope).
func (r *Call) GetState(ctx context.Context, m *wire.GetStateRequest) (*wire.GetStateReply, error) {
	c, err := consumerOf(m.Consumer)
	if err != nil {
		return nil, err
	}
	inspect := c.Name == ""
	switch {
	case inspect && m.Group == "":
		return nil, invalidArgument("get-state needs a group member, a named consumer, or a group to inspect")
	case inspect:
		err = r.allow(m.Topic, wire.ScopeAdmin)
	default:
		err = r.allow(m.Topic, wire.ScopeConsume)
	}
	if err != nil {
		return nil, err
	}
	t, o, err := r.partitionOf(m.Topic, [16]byte{}, m.Partition)
	if err != nil {
		return nil, err
	}
	q := owner.StateQuery{Key: m.Key, Prefix: m.Prefix, After: m.After, MaxBytes: int(m.MaxBytes)}
	if q.MaxBytes == 0 {
		q.MaxBytes = defaultStateReplyBytes
	}
	q.MaxBytes = min(q.MaxBytes, maxStateReplyBytes)
	var snap owner.StateSnapshot
	if inspect {
		snap, err = o.InspectState(ctx, m.Group, q)
	} else {
		snap, err = o.LoadStateQuery(ctx, c, q)
	}
	if err != nil {
		return nil, topicError(t, err)
	}
	rep := &wire.GetStateReply{
		State: wire.PartitionState{
			Partition: m.Partition, StartOffset: snap.State.LogStart,
			HighWatermark: snap.State.HighWatermark, History: uint64(snap.State.History),
		},
		HasCommitted: snap.HasCommitted,
		Offset:       snap.Committed.Offset,
		History:      uint64(snap.Committed.History),
		Next:         snap.Next,
		Moved:        snap.Resolved.Moved,
		More:         snap.More,
		Entries:      make([]wire.StateEntry, len(snap.Entries)),
	}
	for i, e := range snap.Entries {
		rep.Entries[i] = wire.StateEntry{Key: e.Key, Value: e.Value}
	}
	return rep, nil
}

// CommitWithState orders the commit of an offset with state changes
// through the partition's owner, lets the stream's next request start,
// then waits for it to be durable.
func (r *Call) CommitWithState(ctx context.Context, m *wire.CommitWithStateRequest) (*wire.CommitWithStateReply, error) {
	c, err := r.progressConsumer(m.Consumer, "state commits")
	if err != nil {
		return nil, err
	}
	if err := r.allow(m.Topic, wire.ScopeConsume); err != nil {
		return nil, err
	}
	t, o, err := r.partitionOf(m.Topic, [16]byte{}, m.Partition)
	if err != nil {
		return nil, err
	}
	tok, err := fence.UnmarshalToken(m.Token)
	if err != nil {
		return nil, err
	}
	changes := make([]owner.StateChange, len(m.Changes))
	for i, ch := range m.Changes {
		switch ch.Op {
		case wire.StatePut:
			changes[i] = owner.StateChange{Key: ch.Key, Value: ch.Value}
		case wire.StateDelete:
			changes[i] = owner.StateChange{Key: ch.Key, Value: ch.Value, Delete: true}
		default:
			return nil, invalidArgument(fmt.Sprintf("state change %d: unknown operation %d", i, ch.Op))
		}
	}
	d, err := o.OrderCommitState(ctx, owner.CommitRequest{Consumer: c, Token: tok, Offset: m.Offset}, changes)
	if err != nil {
		return nil, topicError(t, err)
	}
	err = r.durableIn(ctx, t, d)
	return &wire.CommitWithStateReply{Offset: m.Offset}, err
}
