package group

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// A group record carries its policy and the deleted flag; version 1
// records (no flags, no policy) are still read; nonsense is refused.
func TestGroupRecordEncoding(t *testing.T) {
	recs := []groupRecord{
		{assignor: wire.AssignorRange, reserved: 32, topics: []string{"a", "b"}, ids: []fence.TopicID{{1}, {2}}},
		{assignor: wire.AssignorRoundRobin, reserved: 7, topics: []string{"t"}, ids: []fence.TopicID{{3}},
			policy: PolicyRecord{V: RecordVersion, Plugin: "checkpoint", Params: map[string]string{"header": "cp", "k": ""}}},
		{reserved: 99, deleted: true},
	}
	for _, r := range recs {
		got, err := decodeGroupRecord(r.encode())
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if got.assignor != r.assignor || got.reserved != r.reserved || !slices.Equal(got.topics, r.topics) ||
			!slices.Equal(got.ids, r.ids) || got.deleted != r.deleted || got.policy.Plugin != r.policy.Plugin ||
			got.policy.V != r.policy.V || !maps.Equal(got.policy.Params, r.policy.Params) {
			t.Fatalf("round trip: %+v, want %+v", got, r)
		}
	}

	// Version 1: the same bytes up to the topics, no tail.
	v2 := recs[0].encode()
	v1 := append([]byte{groupRecordVersionV1}, v2[1:len(v2)-5]...)
	got, err := decodeGroupRecord(v1)
	if err != nil || got.reserved != 32 || !slices.Equal(got.topics, recs[0].topics) || got.deleted || got.policy.Plugin != "" {
		t.Fatalf("version 1 record: %+v, %v", got, err)
	}

	bad := map[string][]byte{
		"unknown flags":         append(slices.Clone(v2[:len(v2)-5]), 0x80, 0, 0, 0, 0),
		"truncated policy":      append(slices.Clone(v2[:len(v2)-5]), 0, 5, 0, 'a'),
		"params without policy": append(slices.Clone(v2[:len(v2)-5]), 0, 0, 0, 1, 0, 0, 0, 0, 0),
		"trailing bytes":        append(slices.Clone(v2), 1),
		"version 3":             append([]byte{3}, v2[1:]...),
	}
	for name, b := range bad {
		if _, err := decodeGroupRecord(b); !errors.Is(err, errGroupRecord) {
			t.Errorf("%s: err %v, want a corrupt record", name, err)
		}
	}
}

// A group's commit policy is durable when SetPolicy returns, shown by
// Describe, kept across a restart, and detached by an empty one; setting
// one on a group that does not exist creates it.
func TestGroupPolicyIsKeptWithTheGroup(t *testing.T) {
	ctx := context.Background()
	w := newGroupWorld(t)
	w.createTopic("t", 2)
	pol := PolicyRecord{Plugin: "checkpoint", Params: map[string]string{"header": "cp"}}
	if err := w.groups.SetPolicy(ctx, "fresh", pol); err != nil {
		t.Fatal(err)
	}
	mustJoin(t, w, "g", "a", "t")
	if err := w.groups.SetPolicy(ctx, "g", pol); err != nil {
		t.Fatal(err)
	}
	w.restart()
	for _, name := range []string{"fresh", "g"} {
		got, ok := w.groups.Policy(name)
		if !ok || got.Plugin != "checkpoint" || got.Params["header"] != "cp" {
			t.Fatalf("%s after a restart: %+v %v", name, got, ok)
		}
		d := w.groups.Describe(name)
		if d.Policy.Name != "checkpoint" || len(d.Policy.Params) != 1 || d.Policy.Params[0] != (wire.FilterParam{Key: "header", Value: "cp"}) {
			t.Fatalf("%s described with policy %+v", name, d.Policy)
		}
	}
	// The subscription written by later steps keeps the policy.
	mustJoin(t, w, "g", "b", "t")
	w.restart()
	if got, ok := w.groups.Policy("g"); !ok || got.Plugin != "checkpoint" {
		t.Fatalf("policy lost by a later write of the record: %+v", got)
	}
	if err := w.groups.SetPolicy(ctx, "g", PolicyRecord{}); err != nil {
		t.Fatal(err)
	}
	w.restart()
	if got, ok := w.groups.Policy("g"); ok {
		t.Fatalf("detached policy still there: %+v", got)
	}
	if d := w.groups.Describe("g"); d.Policy.Name != "" {
		t.Fatalf("detached policy described: %+v", d.Policy)
	}
	if err := w.groups.SetPolicy(ctx, "", pol); !errors.Is(err, wire.StatusInvalidArgument) {
		t.Fatalf("policy of an unnamed group: %v", err)
	}
}

// Deleting a group is refused while it has members; once they left, it
// removes the group's committed offsets on every partition (through the
// owners), its policy and its record, durably. A group created again
// under the name has no offsets and continues above the deleted one's
// epochs, also after a restart.
//
// covers: G60
func TestDeleteGroup(t *testing.T) {
	ctx := context.Background()
	w := newGroupWorld(t)
	tt := w.createTopic("t", 2)
	w.createTopic("other", 1)
	w.produce("t", 0, "a", "b", "c")
	a := mustJoin(t, w, "g", "a", "t")
	if err := w.groups.SetPolicy(ctx, "g", PolicyRecord{Plugin: "p"}); err != nil {
		t.Fatal(err)
	}
	c := owner.Consumer{Name: "g", Member: "a", MemberEpoch: fence.MemberEpoch(a.MemberEpoch)}
	res, err := tt.owners[0].Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromFirst})
	if err != nil {
		t.Fatal(err)
	}
	if err := tt.owners[0].Commit(ctx, owner.CommitRequest{Consumer: c, Token: res.Token, Offset: res.Next}); err != nil {
		t.Fatal(err)
	}
	if off, ok := w.committed("g", "t", 0); !ok || off != 3 {
		t.Fatalf("committed %d %v", off, ok)
	}

	err = w.groups.Delete(ctx, "g")
	if !errors.Is(err, ErrGroupNotEmpty) || !errors.Is(err, owner.ErrInvalidArgument) {
		t.Fatalf("deleting a group with a member: %v", err)
	}
	if _, ok := w.committed("g", "t", 0); !ok {
		t.Fatal("a refused deletion removed the offset")
	}
	if err := w.groups.Leave(ctx, "g", "a", 0); err != nil {
		t.Fatal(err)
	}
	epoch := w.groups.Describe("g").GroupEpoch
	if err := w.groups.Delete(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.committed("g", "t", 0); ok {
		t.Fatal("the deleted group's offset is still there")
	}
	if _, ok := w.groups.Policy("g"); ok {
		t.Fatal("the deleted group's policy is still there")
	}
	if l := w.groups.List(); len(l) != 0 {
		t.Fatalf("groups after the deletion: %+v", l)
	}
	if err := w.groups.Delete(ctx, "g"); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("deleting it again: %v", err)
	}

	// Durable: after a restart the group is still gone, and a new one
	// under the name starts above the deleted one's epochs.
	w.restart()
	if l := w.groups.List(); len(l) != 0 {
		t.Fatalf("groups after a restart: %+v", l)
	}
	if _, ok := w.committed("g", "t", 0); ok {
		t.Fatal("the deleted group's offset came back after a restart")
	}
	b := mustJoin(t, w, "g", "b", "t")
	if b.MemberEpoch <= epoch {
		t.Fatalf("the group created again has epoch %d, the deleted one had %d", b.MemberEpoch, epoch)
	}
	if _, ok := w.groups.Policy("g"); ok {
		t.Fatal("the group created again has the deleted one's policy")
	}
}

// A deleted group's offsets are removed even on topics it no longer
// subscribes to: every partition of every topic.
func TestDeleteGroupRemovesOffsetsOfEveryTopic(t *testing.T) {
	ctx := context.Background()
	w := newGroupWorld(t)
	old := w.createTopic("old", 1)
	w.createTopic("new", 1)
	w.produce("old", 0, "x")
	a := mustJoin(t, w, "g", "a", "old")
	c := owner.Consumer{Name: "g", Member: "a", MemberEpoch: fence.MemberEpoch(a.MemberEpoch)}
	res, err := old.owners[0].Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromFirst})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.owners[0].Commit(ctx, owner.CommitRequest{Consumer: c, Token: res.Token, Offset: res.Next}); err != nil {
		t.Fatal(err)
	}
	// The member joins again subscribed to another topic only, then leaves.
	mustJoin(t, w, "g", "a", "new")
	if err := w.groups.Leave(ctx, "g", "a", 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.committed("g", "old", 0); !ok {
		t.Fatal("no offset on the old topic before the deletion")
	}
	if err := w.groups.Delete(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.committed("g", "old", 0); ok {
		t.Fatal("the offset on a topic the group no longer subscribes to survived its deletion")
	}
}
