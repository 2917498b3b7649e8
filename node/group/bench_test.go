package group

import (
	"context"
	"testing"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// A group member's commit and poll on the owner's hot paths, the
// coordinator answering Member for real. What the fence checks alone cost
// is measured in package fence (BenchmarkCheckCommitMember).

func benchGroupOwner(b *testing.B) (*owner.Owner, owner.Consumer) {
	ctx := context.Background()
	w := newGroupWorld(b)
	tt := w.createTopic("t", 1)
	o := tt.owners[0]
	if _, err := o.Produce(ctx, ownertest.BenchBatch(b, 100, 16)); err != nil {
		b.Fatal(err)
	}
	a, err := w.groups.Join(ctx, JoinRequest{Group: "g", Member: "m", Topics: []string{"t"}})
	if err != nil {
		b.Fatal(err)
	}
	return o, owner.Consumer{Name: "g", Member: "m", MemberEpoch: fence.MemberEpoch(a.MemberEpoch)}
}

func BenchmarkGroupMemberCommit(b *testing.B) {
	ctx := context.Background()
	o, c := benchGroupOwner(b)
	r, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromFirst})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := o.Commit(ctx, owner.CommitRequest{Consumer: c, Token: r.Token, Offset: 100}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGroupMemberPoll(b *testing.B) {
	ctx := context.Background()
	o, c := benchGroupOwner(b)
	req := owner.PollRequest{Consumer: c, From: owner.FromFirst}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.Poll(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroupsMember is what an owner pays per check to learn a
// member's epoch from the coordinator (a read lock and a map lookup).
func BenchmarkGroupsMember(b *testing.B) {
	w := newGroupWorld(b)
	w.createTopic("t", 1)
	if _, err := w.groups.Join(context.Background(), JoinRequest{Group: "g", Member: "m", Topics: []string{"t"}}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if known, _ := w.groups.Member("g", "m"); !known {
			b.Fatal("unknown member")
		}
	}
}
