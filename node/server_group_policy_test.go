package node

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ledgemq/ledge/record"

	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/transport/wire"
)

// markedBatch builds one batch of records whose values are vs; a value
// starting with '*' is marked with the header cp (the checkpoint policy's
// mark under header=cp).
func markedBatch(t testing.TB, vs ...string) []byte {
	t.Helper()
	var b record.BatchBuilder
	for _, v := range vs {
		r := record.Record{Timestamp: 1, Value: []byte(v)}
		if v[0] == '*' {
			r.Headers = []record.Header{{Key: "cp", Value: []byte("y")}}
		}
		b.Append(r)
	}
	out, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A commit policy attached to a group, over QUIC and the storage engine:
// every poll of a member runs it, and its proposal is committed with the
// poll's token. A member fenced between its poll and the proposal's
// commit — it joined again under its id, and regained the partition
// under a new assignment epoch — has its stale proposal dropped; the new
// incarnation's polls commit as the policy says. The policy is kept with
// the group across a restart, and shown by describe-group.
//
// covers: G61
func TestE2EGroupCommitPolicyFollowsThePolicyAndDropsFencedProposals(t *testing.T) {
	dir := t.TempDir()
	tweak := func(cfg *Config) {
		cfg.DataDir = dir
		// Compiling a Go plugin takes seconds; the cache keeps it across runs.
		if d, err := os.UserCacheDir(); err == nil {
			cfg.Plugins.CacheDir = filepath.Join(d, "ledge", "node-plugins-wazero")
		}
	}
	tn := startNode(t, nil, tweak)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("frames", wire.TopicConfig{Partitions: 1})
	c.mustCall(&wire.AddPluginRequest{Name: "checkpoint", PluginKind: wire.PluginCommitPolicy,
		Module: buildPluginWasm(t, "../sdk/plugin/examples/checkpoint")}, &wire.AddPluginReply{})
	policy := wire.Filter{Name: "checkpoint", Params: []wire.FilterParam{{Key: "header", Value: "cp"}}}
	c.mustCall(&wire.SetPolicyRequest{Target: wire.PolicyGroup, Name: "g", Policy: policy}, &wire.SetPolicyReply{})
	// A group policy is not a named consumer's of the same name, and
	// setting a filter as a policy is refused.
	err := c.call(c.main, &wire.SetPolicyRequest{Target: wire.PolicyGroup, Name: "g", Policy: wire.Filter{Name: "nope"}}, &wire.SetPolicyReply{})
	if statusOfErr(err) != wire.StatusUnknownPlugin {
		t.Fatalf("an unknown policy: %v", err)
	}
	if _, ok := tn.plugins.PolicyOf("g"); ok {
		t.Fatal("the group's policy was attached to the named consumer g")
	}

	join := func(member string) wire.MemberAssignment {
		var rep wire.JoinGroupReply
		c.mustCall(&wire.JoinGroupRequest{Group: "g", MemberID: member, Topics: []string{"frames"}}, &rep)
		if len(rep.Assignment) != 1 {
			t.Fatalf("%s holds %+v", member, rep.Assignment)
		}
		return rep.MemberAssignment
	}
	asMember := func(a wire.MemberAssignment) wire.Consumer {
		return wire.Consumer{Kind: wire.ConsumerMember, Name: "g", MemberID: a.MemberID, MemberEpoch: a.MemberEpoch}
	}
	next := wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}
	describe := func() wire.DescribeGroupReply {
		var d wire.DescribeGroupReply
		c.mustCall(&wire.DescribeGroupRequest{Group: "g"}, &d)
		return d
	}
	committed := func() (uint64, bool) {
		d := describe()
		if len(d.Offsets) != 1 {
			t.Fatalf("offsets %+v", d.Offsets)
		}
		return d.Offsets[0].Offset, d.Offsets[0].HasOffset
	}

	// The member's poll delivers three records; the policy commits
	// through the last marked one.
	a := join("a")
	if _, err := c.produce(c.main, "frames", 0, markedBatch(t, "*0", "*1", "2")); err != nil {
		t.Fatal(err)
	}
	rep := c.pollOne(c.stream(), asMember(a), "frames", next, 0)
	if got := values(t, rep.Batches); rep.Status != wire.StatusOK || !eq(got, []string{"0:*0", "1:*1", "2:2"}) {
		t.Fatalf("first poll: %v %q %q", rep.Status, rep.Message, got)
	}
	if off, ok := committed(); !ok || off != 2 {
		t.Fatalf("committed %d %v, want 2 (through the mark at 1)", off, ok)
	}

	// Between the next poll and its proposal's commit, the member is
	// fenced: it joins again under its id and regains the partition.
	if _, err := c.produce(c.main, "frames", 0, markedBatch(t, "*3", "4")); err != nil {
		t.Fatal(err)
	}
	rejoined := make(chan wire.MemberAssignment, 1)
	var fenced atomic.Int32
	fence := func() {
		fenced.Add(1)
		a, err := tn.groups.Join(context.Background(), group.JoinRequest{Group: "g", Member: "a", Topics: []string{"frames"}})
		if err != nil {
			t.Error(err)
		}
		rejoined <- a
	}
	tn.plugins.BeforePolicyCommit.Store(&fence)
	rep = c.pollOne(c.stream(), asMember(a), "frames", next, 0)
	tn.plugins.BeforePolicyCommit.Store(nil)
	if got := values(t, rep.Batches); rep.Status != wire.StatusOK || !eq(got, []string{"3:*3", "4:4"}) || fenced.Load() != 1 {
		t.Fatalf("second poll: %v %q %q, fenced %d times", rep.Status, rep.Message, got, fenced.Load())
	}
	again := <-rejoined
	if len(again.Assignment) != 1 || again.Assignment[0].AssignmentEpoch <= a.Assignment[0].AssignmentEpoch {
		t.Fatalf("the new incarnation holds %+v (the first held %+v)", again.Assignment, a.Assignment)
	}
	if off, _ := committed(); off != 2 {
		t.Fatalf("a fenced member's proposal was applied: committed %d, want 2", off)
	}

	// The old incarnation polls on: refused. The new one resumes at the
	// committed offset and its poll's proposal is applied.
	if rep := c.pollOne(c.stream(), asMember(a), "frames", next, 0); rep.Status == wire.StatusOK {
		t.Fatal("the fenced incarnation polled")
	}
	// (Whole stored batches: the first holds 0–2; the consumer skips
	// what is below the position.)
	rep = c.pollOne(c.stream(), asMember(again), "frames", next, 0)
	if got := values(t, rep.Batches); rep.Status != wire.StatusOK || !eq(got, []string{"0:*0", "1:*1", "2:2", "3:*3", "4:4"}) {
		t.Fatalf("new incarnation's poll: %v %q %q", rep.Status, rep.Message, got)
	}
	if off, _ := committed(); off != 4 {
		t.Fatalf("committed %d, want 4 (through the mark at 3)", off)
	}

	// The policy is shown, and kept across a restart.
	if d := describe(); d.Policy.Name != "checkpoint" || len(d.Policy.Params) != 1 || d.Policy.Params[0].Value != "cp" {
		t.Fatalf("described policy %+v", d.Policy)
	}
	_ = c.conn.Close()
	if err := tn.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tn = startNode(t, nil, tweak)
	c = tn.mustDial(t, tn.admin)
	if d := describe(); d.Policy.Name != "checkpoint" || len(d.Policy.Params) != 1 {
		t.Fatalf("policy after a restart: %+v", d.Policy)
	}
	if _, err := c.produce(c.main, "frames", 0, markedBatch(t, "*5")); err != nil {
		t.Fatal(err)
	}
	b := join("b")
	rep = c.pollOne(c.stream(), asMember(b), "frames", next, 0)
	if got := values(t, rep.Batches); rep.Status != wire.StatusOK || !eq(got, []string{"3:*3", "4:4", "5:*5"}) {
		t.Fatalf("poll after a restart: %v %q %q", rep.Status, rep.Message, got)
	}
	if off, _ := committed(); off != 6 {
		t.Fatalf("committed %d after a restart, want 6", off)
	}

	// Deleting the group: refused while b is a member, then done.
	err = c.call(c.main, &wire.DeleteGroupRequest{Group: "g"}, &wire.DeleteGroupReply{})
	if statusOfErr(err) != wire.StatusInvalidArgument {
		t.Fatalf("deleting a group with a member: %v", err)
	}
	c.mustCall(&wire.LeaveGroupRequest{Group: "g", MemberID: b.MemberID, MemberEpoch: b.MemberEpoch}, &wire.LeaveGroupReply{})
	c.mustCall(&wire.DeleteGroupRequest{Group: "g"}, &wire.DeleteGroupReply{})
	if d := describe(); d.Policy.Name != "" || len(d.Offsets) != 0 {
		t.Fatalf("deleted group described as %+v", d)
	}
	var list wire.ListGroupsReply
	c.mustCall(&wire.ListGroupsRequest{}, &list)
	if len(list.Groups) != 0 {
		t.Fatalf("groups after the deletion: %+v", list.Groups)
	}
}
