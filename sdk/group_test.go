package sdk

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/fence"
)

var (
	p0 = TopicPartition{Topic: "t", Partition: 0}
	p1 = TopicPartition{Topic: "t", Partition: 1}
)

// callbacks records the rebalance callbacks on the node's event list, so
// a test sees them in order with the commits and confirmations.
func callbacks(n *fakeGroupNode) []GroupOption {
	rec := func(what string) PartitionsFunc {
		return func(_ context.Context, tps []TopicPartition) {
			n.mu.Lock()
			defer n.mu.Unlock()
			for _, tp := range tps {
				n.event("%s %s/%d", what, tp.Topic, tp.Partition)
			}
		}
	}
	return []GroupOption{OnAssigned(rec("assigned")), OnRevoked(rec("revoked")), OnLost(rec("lost"))}
}

func newTestGroupConsumer(t *testing.T, n *fakeGroupNode, opts ...GroupOption) *GroupConsumer {
	t.Helper()
	cfg := defaultGroupConfig()
	for _, o := range append(callbacks(n), opts...) {
		o.applyGroup(&cfg)
	}
	g, err := newGroupConsumer(context.Background(), n, "g", []string{"t"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

func values(recs []*Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

func poll(t *testing.T, g *GroupConsumer) []string {
	t.Helper()
	recs, err := g.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return values(recs)
}

func expectEvents(t *testing.T, n *fakeGroupNode, want ...string) {
	t.Helper()
	if got := n.takeEvents(); !slices.Equal(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

// heartbeatTick lets the heartbeat loop run once.
func heartbeatTick() {
	time.Sleep(1100 * time.Millisecond)
	synctest.Wait()
}

// At least once: a Poll commits what the previous one returned, with that
// poll's token.
func TestGroupConsumerAtLeastOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeGroupNode()
		n.assign(p0)
		n.produce(p0, "a", "b")
		g := newTestGroupConsumer(t, n)
		if got := poll(t, g); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("first poll: %q", got)
		}
		expectEvents(t, n, "join m1", "assigned t/0")
		n.produce(p0, "c")
		if got := poll(t, g); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("second poll: %q", got)
		}
		expectEvents(t, n, "commit t/0@2")
		if err := g.CommitPolled(context.Background()); err != nil {
			t.Fatal(err)
		}
		expectEvents(t, n, "commit t/0@3")
	})
}

// A revoked partition is committed, passed to OnRevoked, and only then
// released — in the next heartbeat, sent at once.
func TestGroupConsumerRevocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeGroupNode()
		n.assign(p0)
		n.assign(p1)
		n.produce(p0, "a")
		n.produce(p1, "x", "y")
		g := newTestGroupConsumer(t, n)
		if got := poll(t, g); len(got) != 3 {
			t.Fatalf("first poll: %q", got)
		}
		n.takeEvents()
		n.revoke(p1)
		heartbeatTick()
		if got := poll(t, g); len(got) != 0 {
			t.Fatalf("second poll: %q", got)
		}
		synctest.Wait()
		// The confirmation races with the commit of t/0: only the order of
		// what concerns t/1 is fixed.
		var t1 []string
		for _, e := range n.takeEvents() {
			if strings.Contains(e, "t/1") {
				t1 = append(t1, e)
			}
		}
		if want := []string{"commit t/1@2", "revoked t/1", "released t/1"}; !slices.Equal(t1, want) {
			t.Fatalf("events of t/1: %q, want %q", t1, want)
		}
		if a := g.Assignment(); !slices.Equal(a, []TopicPartition{p0}) {
			t.Fatalf("assignment %v", a)
		}
	})
}

// A commit refused as fenced (the partition moved without the member
// knowing) drops what was pending, reports the partition lost, and the
// member neither reads nor commits it until it is assigned again.
func TestGroupConsumerFencedCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		n := newFakeGroupNode()
		n.assign(p0)
		n.assign(p1)
		n.produce(p0, "a", "b")
		n.produce(p1, "x")
		g := newTestGroupConsumer(t, n)
		recs, err := g.Poll(ctx)
		if err != nil || len(recs) != 3 {
			t.Fatalf("first poll: %v %v", values(recs), err)
		}
		n.takeEvents()
		n.moveSilently(p0)
		if _, err := g.Poll(ctx); !errors.Is(err, fence.ErrUnassignedPartition) {
			t.Fatalf("poll after the move: %v", err)
		}
		expectEvents(t, n, "commit t/0@2 refused: unassigned partition", "commit t/1@1", "lost t/0")
		if a := g.Assignment(); !slices.Equal(a, []TopicPartition{p1}) {
			t.Fatalf("assignment %v", a)
		}
		// Nothing more for t/0: records of it are not committed.
		if err := g.Commit(ctx, recs...); !errors.Is(err, ErrNotAssigned) {
			t.Fatalf("commit of a lost partition's records: %v", err)
		}
		if _, err := g.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		for _, e := range n.takeEvents() {
			if strings.HasPrefix(e, "commit t/0") || strings.HasPrefix(e, "poll t/0") {
				t.Fatalf("the member still worked on t/0: %v", e)
			}
		}
		// Assigned again, under a new assignment epoch: read from the
		// committed offset.
		n.assign(p0)
		heartbeatTick()
		n.mu.Lock()
		delete(n.delivered, p0)
		n.mu.Unlock()
		if got := poll(t, g); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("after the new assignment: %q", got)
		}
		expectEvents(t, n, "assigned t/0")
	})
}

// A member the node no longer knows loses every partition — nothing is
// committed for them — and rejoins under its id.
func TestGroupConsumerLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeGroupNode()
		n.assign(p0)
		n.produce(p0, "a")
		g := newTestGroupConsumer(t, n)
		if got := poll(t, g); len(got) != 1 {
			t.Fatalf("first poll: %q", got)
		}
		n.takeEvents()
		n.forget()
		heartbeatTick()
		if got := poll(t, g); len(got) != 0 {
			t.Fatalf("poll after the fence: %q", got)
		}
		expectEvents(t, n, "lost t/0", "join m1")
		if n.joins != 2 || g.MemberID() != "m1" {
			t.Fatalf("joins %d, member %q", n.joins, g.MemberID())
		}
	})
}

// At most once: the node commits on delivery; the consumer never commits.
func TestGroupConsumerAtMostOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeGroupNode()
		n.assign(p0)
		n.produce(p0, "a", "b")
		g := newTestGroupConsumer(t, n, WithDelivery(AtMostOnce))
		if got := poll(t, g); len(got) != 2 {
			t.Fatalf("poll: %q", got)
		}
		if got := poll(t, g); len(got) != 0 {
			t.Fatalf("poll: %q", got)
		}
		expectEvents(t, n, "join m1", "assigned t/0", "commit on delivery t/0@2")
		if err := g.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		expectEvents(t, n, "revoked t/0", "leave")
	})
}

// Commit by policy: the consumer commits nothing of its own — not at the
// next poll, not on revocation or Close — and refuses to commit state;
// the group's policy on the node decides, and an explicit Commit of
// records still works.
func TestGroupConsumerCommitByPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeGroupNode()
		n.assign(p0)
		n.produce(p0, "a", "b")
		g := newTestGroupConsumer(t, n, WithDelivery(CommitByPolicy))
		first, err := g.Poll(context.Background())
		if err != nil || len(first) != 2 {
			t.Fatalf("poll: %d records, %v", len(first), err)
		}
		n.produce(p0, "c")
		if got := poll(t, g); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("second poll: %q", got)
		}
		expectEvents(t, n, "join m1", "assigned t/0")
		if err := g.CommitState(context.Background(), first[1], nil); err == nil {
			t.Fatal("CommitState accepted under CommitByPolicy")
		}
		if err := g.Commit(context.Background(), first...); err != nil {
			t.Fatal(err)
		}
		expectEvents(t, n, "commit t/0@2")
		if err := g.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		expectEvents(t, n, "revoked t/0", "leave")
	})
}

// Close commits what is pending, revokes every partition and leaves.
func TestGroupConsumerClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeGroupNode()
		n.assign(p0)
		n.produce(p0, "a")
		g := newTestGroupConsumer(t, n)
		poll(t, g)
		n.takeEvents()
		if err := g.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		expectEvents(t, n, "commit t/0@1", "revoked t/0", "leave")
		if _, err := g.Poll(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("poll after close: %v", err)
		}
	})
}
