package group

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/transport/wire"
)

// counter is a stream processor that counts events per key, with its
// state kept in the partition's fenced state store.
type counter struct {
	t      *testing.T
	w      *groupWorld
	member string
	epoch  fence.MemberEpoch
	counts map[string]int
	// next is the offset of the next event to process; tok the token of
	// the last poll.
	next uint64
	tok  fence.Token
	part int
	// group is the group's name; "" is "g".
	group string
}

func (c *counter) who() owner.Consumer {
	g := c.group
	if g == "" {
		g = "g"
	}
	return owner.Consumer{Name: g, Member: c.member, MemberEpoch: c.epoch}
}

func (c *counter) owner() *owner.Owner { return c.w.topics.topic("t").owners[c.part] }

// load takes over the partition: it loads the state and the offset it
// corresponds to, and resumes there.
func (c *counter) load() owner.StateSnapshot {
	c.t.Helper()
	snap, err := c.owner().LoadState(context.Background(), c.who(), nil)
	if err != nil {
		c.t.Fatalf("%s loads: %v", c.member, err)
	}
	c.counts = map[string]int{}
	for _, e := range snap.Entries {
		n, err := strconv.Atoi(string(e.Value))
		if err != nil {
			c.t.Fatal(err)
		}
		c.counts[string(e.Key)] = n
	}
	c.next = snap.Next
	return snap
}

// process polls and counts events until it reaches offset until.
func (c *counter) process(until uint64) {
	c.t.Helper()
	for c.next < until {
		r, err := c.owner().Poll(context.Background(), owner.PollRequest{
			Consumer: c.who(), From: owner.FromOffset, Offset: c.next, MaxMessages: int(until - c.next),
		})
		if err != nil {
			c.t.Fatalf("%s polls at %d: %v", c.member, c.next, err)
		}
		for _, key := range ownertest.RecordsOf(c.t, r) {
			c.counts[key]++
		}
		c.next, c.tok = r.Next, r.Token
	}
}

// commit commits the offset reached with the counts changed since the
// state loaded (here: every count, as puts).
func (c *counter) commit() error {
	changes := make([]owner.StateChange, 0, len(c.counts))
	for _, k := range sortedKeys(c.counts) {
		changes = append(changes, owner.StateChange{Key: []byte(k), Value: []byte(strconv.Itoa(c.counts[k]))})
	}
	return c.owner().CommitState(context.Background(), owner.CommitRequest{Consumer: c.who(), Token: c.tok, Offset: c.next}, changes)
}

// stored returns the group's stored state and offset, as an administrator
// sees them.
func stored(t *testing.T, o *owner.Owner) (map[string]string, uint64) {
	t.Helper()
	snap, err := o.InspectState(context.Background(), "g", owner.StateQuery{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range snap.Entries {
		m[string(e.Key)] = string(e.Value)
	}
	return m, snap.Committed.Offset
}

// TestStateScenarioStaleOwnerCannotWrite is the story of the unfenced
// snapshot store, told with three members of group g on a partition of
// topic t. Offsets count from 0: "offset 10" is the position after the
// first ten events, where the eleventh is read.
//
//  1. A holds the partition, loads the empty state and processes five
//     events: it holds state_5, not yet committed.
//  2. A stalls (network trouble). Its session runs out; the group gives
//     the partition to B. A does not know.
//  3. B loads state_0 at offset 0, processes events up to offset 10 and
//     commits state_10 with offset 10, in one write.
//  4. A wakes up and writes its stale state_5 with offset 5: refused with
//     a fence error, and nothing is written — not the offset, not a key.
//  5. B leaves; C takes the partition, loads state_10 at offset 10, and
//     continues from there to the end.
//  6. The final state is the fold of every event, each counted once.
//
// covers: G51 G52
func TestStateScenarioStaleOwnerCannotWrite(t *testing.T) {
	ctx := context.Background()
	w := newGroupWorld(t)
	w.createTopic("t", 1)
	keys := []string{"red", "blue", "red", "green", "red", "blue", "red", "green", "blue", "red", "red", "blue", "green", "red", "blue"}
	w.produce("t", 0, keys...)
	all := uint64(len(keys))

	// 1. A holds the partition and processes five events.
	aa := mustJoin(t, w, "g", "A", "t")
	a := &counter{t: t, w: w, member: "A", epoch: fence.MemberEpoch(aa.MemberEpoch)}
	if snap := a.load(); snap.HasCommitted || len(snap.Entries) != 0 || snap.Next != 0 {
		t.Fatalf("A's first load: %+v", snap)
	}
	a.process(5)

	// 2. A stalls; its session times out while B heartbeats. B receives
	// the partition.
	bb := mustJoin(t, w, "g", "B", "t")
	w.clock.Advance(6 * time.Second)
	if _, err := w.groups.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "B", Epoch: fence.MemberEpoch(bb.MemberEpoch)}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(5 * time.Second)
	bb, err := w.groups.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "B", Epoch: fence.MemberEpoch(bb.MemberEpoch)})
	if err != nil || len(bb.Assignment) != 1 {
		t.Fatalf("B's assignment: %+v %v", bb, err)
	}
	b := &counter{t: t, w: w, member: "B", epoch: fence.MemberEpoch(bb.MemberEpoch)}

	// 3. B loads state_0 at offset 0, processes to 10, commits state_10@10.
	if snap := b.load(); snap.HasCommitted || len(snap.Entries) != 0 || snap.Next != 0 {
		t.Fatalf("B loads %+v, want state_0 at offset 0", snap)
	}
	b.process(10)
	if err := b.commit(); err != nil {
		t.Fatalf("B commits state_10: %v", err)
	}
	state10 := fold(keys[:10])
	if got, off := stored(t, b.owner()); !maps.Equal(got, state10) || off != 10 {
		t.Fatalf("after B: %v@%d, want %v@10", got, off, state10)
	}

	// 4. A's stale write of state_5 is refused, and changes nothing.
	err = a.commit()
	var fe *fence.Error
	if !errors.As(err, &fe) || !errors.Is(err, fence.ErrUnknownMember) {
		t.Fatalf("A's stale state_5: %v, want a fence rejection (unknown member)", err)
	}
	if got, off := stored(t, a.owner()); !maps.Equal(got, state10) || off != 10 {
		t.Fatalf("after A's refused write: %v@%d, want state_10@10", got, off)
	}
	// Nor may A read the state any more.
	if _, err := a.owner().LoadState(ctx, a.who(), nil); !errors.Is(err, fence.ErrUnknownMember) {
		t.Fatalf("A loads after losing the partition: %v", err)
	}

	// 5. B leaves; C takes over from state_10 at offset 10.
	if err := w.groups.Leave(ctx, "g", "B", b.epoch); err != nil {
		t.Fatal(err)
	}
	cc := mustJoin(t, w, "g", "C", "t")
	if len(cc.Assignment) != 1 {
		t.Fatalf("C's assignment: %+v", cc)
	}
	c := &counter{t: t, w: w, member: "C", epoch: fence.MemberEpoch(cc.MemberEpoch)}
	snap := c.load()
	if !snap.HasCommitted || snap.Committed.Offset != 10 || snap.Next != 10 || !maps.Equal(entriesOf(snap), state10) {
		t.Fatalf("C loads %v@%d (next %d), want state_10@10", entriesOf(snap), snap.Committed.Offset, snap.Next)
	}
	c.process(all)
	if err := c.commit(); err != nil {
		t.Fatalf("C commits: %v", err)
	}

	// 6. The final state is the fold of all events, each once.
	if got, off := stored(t, c.owner()); !maps.Equal(got, fold(keys)) || off != all {
		t.Fatalf("final state %v@%d, want %v@%d", got, off, fold(keys), all)
	}
}

// fold counts keys, as the stored state spells counts.
func fold(keys []string) map[string]string {
	n := map[string]int{}
	for _, k := range keys {
		n[k]++
	}
	out := map[string]string{}
	for k, v := range n {
		out[k] = strconv.Itoa(v)
	}
	return out
}

func entriesOf(s owner.StateSnapshot) map[string]string {
	m := map[string]string{}
	for _, e := range s.Entries {
		m[string(e.Key)] = string(e.Value)
	}
	return m
}

// The same story when A is not expired but a rebalance moved the
// partition to B: A's stale write is refused (unassigned partition) and
// writes nothing, and B resumes from what was committed before.
//
// covers: G51
func TestStateMovedPartitionCannotBeWritten(t *testing.T) {
	ctx := context.Background()
	w := newGroupWorld(t)
	w.createTopic("t", 2)
	w.produce("t", 1, "x", "y", "x", "z")
	aa := mustJoin(t, w, "g", "A", "t")
	a := &counter{t: t, w: w, member: "A", epoch: fence.MemberEpoch(aa.MemberEpoch), part: 1}
	a.load()
	a.process(1)
	if err := a.commit(); err != nil {
		t.Fatal(err)
	}
	a.process(3)
	// B joins; A gives up partition 1 and confirms it; B receives it.
	bb := mustJoin(t, w, "g", "B", "t")
	ha, err := w.groups.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "A", Epoch: a.epoch,
		Owned: []wire.TopicPartition{{Topic: "t", Partition: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ha.Assignment) != 1 || ha.Assignment[0].Partition != 0 {
		t.Fatalf("A keeps %+v, want t/0", ha.Assignment)
	}
	bb, err = w.groups.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "B", Epoch: fence.MemberEpoch(bb.MemberEpoch)})
	if err != nil || len(bb.Assignment) != 1 || bb.Assignment[0].Partition != 1 {
		t.Fatalf("B receives %+v, %v; want t/1", bb.Assignment, err)
	}
	if err := a.commit(); !errors.Is(err, fence.ErrUnassignedPartition) {
		t.Fatalf("A writes a partition it gave up: %v, want unassigned partition", err)
	}
	b := &counter{t: t, w: w, member: "B", epoch: fence.MemberEpoch(bb.MemberEpoch), part: 1}
	snap := b.load()
	if snap.Committed.Offset != 1 || snap.Next != 1 || !maps.Equal(entriesOf(snap), fold([]string{"x"})) {
		t.Fatalf("B loads %v@%d, want the state A committed at 1", entriesOf(snap), snap.Committed.Offset)
	}
}
