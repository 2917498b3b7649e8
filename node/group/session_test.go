package group

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/transport/wire"
)

// TestGroupMinimumSessionMemberIsNeverExpelled: a member that joins with
// the minimum session is told to heartbeat at a third of it, and one that
// heartbeats as the SDK does — the interval it was told, after the
// previous reply, with a slow round trip — stays in the group for ten
// minutes of the coordinator's expiry loop.
func TestGroupMinimumSessionMemberIsNeverExpelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newGroupWorld(t)
		w.createTopic("t", 3)
		gs, err := OpenGroups(GroupsConfig{Meta: ownertest.NewMeta(), Topics: w.topics, Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go gs.Run(ctx, time.Second) // as a node runs it

		a, err := gs.Join(ctx, JoinRequest{Group: "g", Member: "m", Topics: []string{"t"}, SessionTimeout: MinSessionTimeout})
		if err != nil {
			t.Fatal(err)
		}
		if a.SessionTimeout != MinSessionTimeout || a.HeartbeatInterval > a.SessionTimeout/3 {
			t.Fatalf("session %v, told to heartbeat every %v: want at most a third of it", a.SessionTimeout, a.HeartbeatInterval)
		}
		const roundTrip = 150 * time.Millisecond
		start := time.Now()
		for time.Since(start) < 10*time.Minute {
			time.Sleep(a.HeartbeatInterval + roundTrip/2)
			var owned []wire.TopicPartition
			for _, p := range a.Assignment {
				owned = append(owned, wire.TopicPartition{Topic: p.Topic, Partition: p.Partition})
			}
			next, err := gs.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "m", Epoch: fence.MemberEpoch(a.MemberEpoch), Owned: owned})
			if err != nil {
				t.Fatalf("after %v: heartbeat refused: %v (the member was expelled)", time.Since(start), err)
			}
			a = next
			time.Sleep(roundTrip / 2)
		}
		if len(a.Assignment) != 3 {
			t.Errorf("the member holds %d partitions at the end, want 3", len(a.Assignment))
		}
		cancel()
	})
}
