package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/transport/wire"
)

// Fenced state (docs/FENCING.md, "Fenced state"). A group keeps a keyed
// store per partition beside its committed offset. The member that holds
// a partition loads the store when it receives the partition (LoadState),
// processes records from the offset the state corresponds to, and commits
// the new offset together with the changes of the state in one call
// (CommitState). The node applies both atomically, and only if the member
// still holds the partition under the assignment the records were polled
// in: a member that lost the partition without knowing cannot overwrite
// the state of the one that replaced it. The records of a partition are
// then counted into its state exactly once, across rebalances, crashes
// and fenced members.

// Limits of state keys and values; see also the per-commit limits in
// docs/FENCING.md (4096 changes, 4 MiB of keys and values).
const (
	MaxStateKeySize   = wire.MaxStateKeyLen
	MaxStateValueSize = wire.MaxStateValueLen
)

// stateLoadBytes is the size of the pages a load asks for.
const stateLoadBytes = 1 << 20

// ErrStateChanged: the state changed on the node while a load read it in
// pages, again and again (only an inspection of a store being written can
// see this). Retry.
var ErrStateChanged = errors.New("sdk: the state changed while it was loaded")

// StateChange is one change of a partition's state: a put of Value under
// Key, or (Delete) the removal of Key. Keys are not empty.
type StateChange struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// PutState returns the change that sets key to value.
func PutState(key, value []byte) StateChange { return StateChange{Key: key, Value: value} }

// DeleteState returns the change that removes key.
func DeleteState(key []byte) StateChange { return StateChange{Key: key, Delete: true} }

// StateEntry is one key of a state store and its value.
type StateEntry struct {
	Key, Value []byte
}

// PartitionStateSnapshot is a partition's state and the committed offset it
// corresponds to, as the node read them in one step.
type PartitionStateSnapshot struct {
	Topic     string
	Partition int32
	// Entries are the keys of the state in key order.
	Entries []StateEntry
	// HasCommitted is false when nothing was committed (then there is no
	// state either).
	HasCommitted bool
	// Offset is the committed offset the state belongs to: the state is
	// the effect of the records before it. History is the history epoch
	// it was committed in.
	Offset  uint64
	History uint64
	// CurrentHistory is the partition's history epoch now. Moved says a
	// purge or a lossy recovery happened since the state was committed:
	// the state was derived from a history that is gone (see
	// docs/FENCING.md for what to do: keep it, or clear it with the first
	// CommitState).
	CurrentHistory uint64
	Moved          bool
	// Next is where the member reads on: the resolved committed offset,
	// or the partition's start offset without one.
	Next uint64
}

// Get returns the value of key, if the state has it.
func (s *PartitionStateSnapshot) Get(key []byte) ([]byte, bool) {
	for _, e := range s.Entries {
		if bytes.Equal(e.Key, key) {
			return e.Value, true
		}
	}
	return nil, false
}

// LoadState loads the state of a partition the member holds, with the
// committed offset it corresponds to, and moves the member's reading of
// the partition to that offset: the next Poll returns the records the
// state does not include yet, and nothing the state already counted. Call
// it when the partition is assigned (from OnAssigned, or before the first
// Poll that reads it). From then on the partition's offset moves only
// with CommitState: Poll, Close and revocations do not commit it
// automatically.
//
// A member that does not hold the partition gets ErrNotAssigned (nothing
// is asked); one the node no longer lets hold it gets the node's fence
// error, and the partition is lost.
func (g *GroupConsumer) LoadState(ctx context.Context, topic string, partition int32) (*PartitionStateSnapshot, error) {
	if g.isClosed() {
		return nil, ErrClosed
	}
	tp := TopicPartition{Topic: topic, Partition: partition}
	g.mu.Lock()
	hp := g.parts[tp]
	who := g.who
	who.MemberEpoch = g.latest.MemberEpoch
	g.mu.Unlock()
	if hp == nil || hp.blocked {
		return nil, fmt.Errorf("sdk: load state %s/%d: %w", topic, partition, ErrNotAssigned)
	}
	snap, err := loadState(ctx, g.b, &wire.GetStateRequest{Consumer: who, Topic: topic, Partition: uint32(partition)})
	if err != nil {
		g.stateRefused(ctx, hp, err)
		return nil, err
	}
	g.mu.Lock()
	if g.parts[tp] == hp && !hp.blocked {
		hp.stateful = true
		hp.pending, hp.cur.last, hp.cur.pos = nil, nil, AtOffset(snap.Next)
	}
	g.mu.Unlock()
	return snap, nil
}

// stateCaller is what a state load needs of a client.
type stateCaller interface {
	call(ctx context.Context, req, reply wire.Message) error
}

// loadState reads every page of a state store. The pages must all belong
// to one committed offset; if the offset moved between pages, the load
// starts again (a few times).
func loadState(ctx context.Context, b stateCaller, req *wire.GetStateRequest) (*PartitionStateSnapshot, error) {
	req.MaxBytes = stateLoadBytes
	for range 5 {
		req.After = nil
		var snap *PartitionStateSnapshot
		for {
			var rep wire.GetStateReply
			if err := b.call(ctx, req, &rep); err != nil {
				return nil, nodeError("get-state", req.Topic, int32(req.Partition), err)
			}
			if snap == nil {
				snap = &PartitionStateSnapshot{
					Topic: req.Topic, Partition: int32(req.Partition), HasCommitted: rep.HasCommitted,
					Offset: rep.Offset, History: rep.History, CurrentHistory: rep.State.History,
					Moved: rep.Moved, Next: rep.Next,
				}
			} else if rep.HasCommitted != snap.HasCommitted || rep.Offset != snap.Offset || rep.History != snap.History {
				snap = nil
				break
			}
			for _, e := range rep.Entries {
				snap.Entries = append(snap.Entries, StateEntry{Key: bytes.Clone(e.Key), Value: bytes.Clone(e.Value)})
			}
			if !rep.More || len(rep.Entries) == 0 {
				return snap, nil
			}
			req.After = bytes.Clone(rep.Entries[len(rep.Entries)-1].Key)
		}
	}
	return nil, fmt.Errorf("sdk: load state %s/%d: %w", req.Topic, req.Partition, ErrStateChanged)
}

// CommitState commits the position after last — the highest record of its
// partition that the state now includes — together with changes to the
// partition's state, in one atomic step fenced by the token of the poll
// that returned last. If the node refuses it (the member no longer holds
// the partition under that assignment, the partition was purged since,
// the commit would move backwards), nothing is written: neither the offset
// nor any change. A refusal as fenced loses the partition (OnLost); after
// fence.ErrStaleHistory, load the state again. Limits: see MaxStateKeySize.
//
// A commit may be retried with the same arguments after a timeout: a
// repeat writes the same offset and the same changes again.
func (g *GroupConsumer) CommitState(ctx context.Context, last *Record, changes []StateChange) error {
	if g.isClosed() {
		return ErrClosed
	}
	if g.cfg.delivery != AtLeastOnce {
		return fmt.Errorf("sdk: commit state: a %s member's offsets move apart from its state (at delivery, or by the group's policy); use AtLeastOnce", g.cfg.delivery)
	}
	if last == nil || last.poll == nil {
		return errors.New("sdk: commit state: the record was not returned by a Poll")
	}
	tp := TopicPartition{Topic: last.Topic, Partition: last.Partition}
	g.mu.Lock()
	hp := g.parts[tp]
	if hp == nil || hp.blocked || !pollOf(hp, last.poll) {
		g.mu.Unlock()
		return fmt.Errorf("sdk: commit state %s/%d: %w", tp.Topic, tp.Partition, ErrNotAssigned)
	}
	who := g.who
	who.MemberEpoch = g.latest.MemberEpoch
	g.mu.Unlock()
	req := &wire.CommitWithStateRequest{
		Consumer: who, Topic: tp.Topic, Partition: uint32(tp.Partition),
		Offset: last.Offset + 1, Token: last.poll.token, Changes: make([]wire.StateChange, len(changes)),
	}
	for i, c := range changes {
		if c.Delete {
			req.Changes[i] = wire.StateChange{Op: wire.StateDelete, Key: c.Key}
		} else {
			req.Changes[i] = wire.StateChange{Op: wire.StatePut, Key: c.Key, Value: c.Value}
		}
	}
	var rep wire.CommitWithStateReply
	if err := g.b.call(ctx, req, &rep); err != nil {
		err = nodeError("commit-with-state", tp.Topic, tp.Partition, err)
		g.stateRefused(ctx, hp, err)
		return err
	}
	g.mu.Lock()
	if hp.pending != nil && hp.pending.next <= req.Offset {
		hp.pending = nil
	}
	g.mu.Unlock()
	return nil
}

// stateRefused handles a fence refusal of a state load or commit as a
// commit's: the member rejoins, or loses the partition.
func (g *GroupConsumer) stateRefused(ctx context.Context, hp *heldPartition, err error) {
	g.noteMemberFence(err)
	if !isMemberFence(err) {
		return
	}
	g.mu.Lock()
	lost := g.parts[hp.tp] == hp && !hp.blocked
	if lost {
		hp.blocked, hp.pending = true, nil
	}
	g.mu.Unlock()
	if lost {
		g.loseSome(ctx, []TopicPartition{hp.tp})
	}
}

// InspectState reads a group's state on a partition, read-only, without
// being a member (it needs a token with the admin scope): what `ledge
// state get` shows. A non-empty key selects one key.
func (c *Client) InspectState(ctx context.Context, group, topic string, partition int32, key []byte) (*PartitionStateSnapshot, error) {
	return loadState(ctx, c, &wire.GetStateRequest{Group: group, Topic: topic, Partition: uint32(partition), Key: key})
}
