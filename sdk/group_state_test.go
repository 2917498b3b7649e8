package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"testing/synctest"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// stateCall serves the state kinds with the fake's member rule: a load
// needs the partition held, a commit is a Commit's check, and a refused
// commit writes nothing. Called with n.mu held.
func (n *fakeGroupNode) stateCall(req, reply wire.Message) error {
	if n.states == nil {
		n.states = map[TopicPartition]map[string]string{}
	}
	switch m := req.(type) {
	case *wire.GetStateRequest:
		tp := TopicPartition{Topic: m.Topic, Partition: int32(m.Partition)}
		_, h := n.facts(m.Consumer, tp)
		if err := fence.CheckMember(h.Member, fence.MemberEpoch(m.Consumer.MemberEpoch)); err != nil {
			return n.refuse("get-state", wire.FenceStatusBase+wire.Status(err.(*fence.Error).Code), err.Error())
		}
		r := reply.(*wire.GetStateReply)
		off, ok := n.committed[tp]
		r.HasCommitted, r.Offset, r.History, r.Next = ok, off, 1, off
		keys := make([]string, 0, len(n.states[tp]))
		for k := range n.states[tp] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			r.Entries = append(r.Entries, wire.StateEntry{Key: []byte(k), Value: []byte(n.states[tp][k])})
		}
		n.event("load state %s/%d@%d", tp.Topic, tp.Partition, off)
	case *wire.CommitWithStateRequest:
		tp := TopicPartition{Topic: m.Topic, Partition: int32(m.Partition)}
		err := n.check(m.Consumer, tp, m.Token, func(p fence.Partition, h fence.Holder, tok fence.Token) error {
			return fence.CheckCommit(p, h, tok, m.Offset, n.committed[tp])
		})
		if err != nil {
			n.event("commit state %s/%d@%d refused: %v", tp.Topic, tp.Partition, m.Offset, err.(*fence.Error).Code)
			return n.refuse("commit-with-state", wire.FenceStatusBase+wire.Status(err.(*fence.Error).Code), err.Error())
		}
		st := n.states[tp]
		if st == nil {
			st = map[string]string{}
			n.states[tp] = st
		}
		for _, c := range m.Changes {
			if c.Op == wire.StateDelete {
				delete(st, string(c.Key))
			} else {
				st[string(c.Key)] = string(c.Value)
			}
		}
		n.committed[tp] = m.Offset
		reply.(*wire.CommitWithStateReply).Offset = m.Offset
		n.event("commit state %s/%d@%d %d changes", tp.Topic, tp.Partition, m.Offset, len(m.Changes))
	}
	return nil
}

// A stateful partition: the load rewinds the reading to the state's
// offset, the offset moves only with CommitState (never by the next
// Poll's automatic commit), and a commit of a partition moved away is
// refused, writes nothing, and loses the partition.
func TestGroupConsumerState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		n := newFakeGroupNode()
		n.assign(p0)
		n.produce(p0, "a", "b", "c")
		n.committed[p0] = 1
		n.states = map[TopicPartition]map[string]string{p0: {"a": "1"}}
		var g *GroupConsumer
		var loaded *PartitionStateSnapshot
		g = newTestGroupConsumer(t, n, OnAssigned(func(ctx context.Context, tps []TopicPartition) {
			var err error
			if loaded, err = g.LoadState(ctx, "t", 0); err != nil {
				t.Error(err)
			}
		}))
		recs, err := g.Poll(ctx)
		if err != nil || !slices.Equal(values(recs), []string{"b", "c"}) {
			t.Fatalf("first poll after the load: %q %v", values(recs), err)
		}
		if v, ok := loaded.Get([]byte("a")); !ok || string(v) != "1" || loaded.Offset != 1 || loaded.Next != 1 {
			t.Fatalf("loaded %+v", loaded)
		}
		if err := g.CommitState(ctx, recs[1], []StateChange{PutState([]byte("b"), []byte("1")), PutState([]byte("c"), []byte("1"))}); err != nil {
			t.Fatal(err)
		}
		n.produce(p0, "d")
		recs, err = g.Poll(ctx)
		if err != nil || !slices.Equal(values(recs), []string{"d"}) {
			t.Fatalf("second poll: %q %v", values(recs), err)
		}
		// The second Poll committed nothing by itself.
		expectEvents(t, n, "join m1", "load state t/0@1", "commit state t/0@3 2 changes")

		n.moveSilently(p0)
		err = g.CommitState(ctx, recs[0], []StateChange{PutState([]byte("d"), []byte("1"))})
		if !errors.Is(err, fence.ErrUnassignedPartition) {
			t.Fatalf("commit of a moved partition: %v", err)
		}
		expectEvents(t, n, "commit state t/0@4 refused: unassigned partition", "lost t/0")
		if fmt.Sprint(n.states[p0]) != "map[a:1 b:1 c:1]" || n.committed[p0] != 3 {
			t.Fatalf("a refused commit wrote: %v @%d", n.states[p0], n.committed[p0])
		}
		if _, err := g.LoadState(ctx, "t", 0); !errors.Is(err, ErrNotAssigned) {
			t.Fatalf("load of a lost partition: %v", err)
		}
		if err := g.CommitState(ctx, recs[0], nil); !errors.Is(err, ErrNotAssigned) {
			t.Fatalf("commit of a lost partition: %v", err)
		}
	})
}

// An at-most-once member commits at delivery: it cannot keep state.
func TestGroupConsumerStateNeedsAtLeastOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		n := newFakeGroupNode()
		n.assign(p0)
		n.produce(p0, "a")
		g := newTestGroupConsumer(t, n, WithDelivery(AtMostOnce))
		recs, err := g.Poll(ctx)
		if err != nil || len(recs) != 1 {
			t.Fatalf("poll: %v %v", recs, err)
		}
		if err := g.CommitState(ctx, recs[0], nil); err == nil {
			t.Fatal("an at-most-once member committed state")
		}
	})
}
