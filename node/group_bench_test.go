package node

import (
	"context"
	"testing"

	"github.com/ledgemq/ledge/fence"
)

// What the member rule costs on the owner's hot paths: a group member's
// commit and poll with every fence check on and off, the coordinator
// answering Member for real. Compare with benchstat:
//
//	go test ./node -run '^$' -bench 'GroupMember' -count 10 > out.txt
//	benchstat -col /fence out.txt

func benchGroupOwner(b *testing.B, skip bool) (*Owner, Consumer) {
	ctx := context.Background()
	w := newGroupWorld(b)
	tt := w.createTopic("t", 1)
	o := tt.owners[0]
	o.skipFence = skip
	if _, err := o.Produce(ctx, benchBatch(b, 100, 16)); err != nil {
		b.Fatal(err)
	}
	a, err := w.groups.Join(ctx, JoinRequest{Group: "g", Member: "m", Topics: []string{"t"}})
	if err != nil {
		b.Fatal(err)
	}
	return o, Consumer{Name: "g", Member: "m", MemberEpoch: fence.MemberEpoch(a.MemberEpoch)}
}

func BenchmarkGroupMemberCommit(b *testing.B) {
	ctx := context.Background()
	fenceModes(b, func(b *testing.B, skip bool) {
		o, c := benchGroupOwner(b, skip)
		r, err := o.Poll(ctx, PollRequest{Consumer: c, From: FromFirst})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := o.Commit(ctx, CommitRequest{Consumer: c, Token: r.Token, Offset: 100}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkGroupMemberPoll(b *testing.B) {
	ctx := context.Background()
	fenceModes(b, func(b *testing.B, skip bool) {
		o, c := benchGroupOwner(b, skip)
		req := PollRequest{Consumer: c, From: FromFirst}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := o.Poll(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The member rule adds no allocation to a group member's commit and poll.
func TestGroupFencingAddsNoAllocations(t *testing.T) {
	ctx := context.Background()
	allocs := func(skip bool) (commit, poll float64) {
		w := newGroupWorld(t)
		o := w.createTopic("t", 1).owners[0]
		o.skipFence = skip
		if _, err := o.Produce(ctx, testBatch(t, "a", "b")); err != nil {
			t.Fatal(err)
		}
		a, err := w.groups.Join(ctx, JoinRequest{Group: "g", Member: "m", Topics: []string{"t"}})
		if err != nil {
			t.Fatal(err)
		}
		c := Consumer{Name: "g", Member: "m", MemberEpoch: fence.MemberEpoch(a.MemberEpoch)}
		r, err := o.Poll(ctx, PollRequest{Consumer: c, From: FromFirst})
		if err != nil {
			t.Fatal(err)
		}
		commit = testing.AllocsPerRun(200, func() {
			if err := o.Commit(ctx, CommitRequest{Consumer: c, Token: r.Token, Offset: 2}); err != nil {
				t.Fatal(err)
			}
		})
		poll = testing.AllocsPerRun(200, func() {
			if _, err := o.Poll(ctx, PollRequest{Consumer: c, From: FromFirst}); err != nil {
				t.Fatal(err)
			}
		})
		return commit, poll
	}
	onCommit, onPoll := allocs(false)
	offCommit, offPoll := allocs(true)
	if onCommit > offCommit || onPoll > offPoll {
		t.Fatalf("allocations with fencing on: commit %v, poll %v; off: commit %v, poll %v", onCommit, onPoll, offCommit, offPoll)
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
