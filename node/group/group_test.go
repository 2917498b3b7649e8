package group

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

func mustJoin(t *testing.T, w *groupWorld, group, member string, topics ...string) wire.MemberAssignment {
	t.Helper()
	a, err := w.groups.Join(context.Background(), JoinRequest{Group: group, Member: member, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGroupHeartbeatRefusals(t *testing.T) {
	ctx := context.Background()
	w := newGroupWorld(t)
	w.createTopic("t", 2)
	a := mustJoin(t, w, "g", "a", "t")
	cases := []struct {
		name string
		req  HeartbeatRequest
		want error
	}{
		{"unknown group", HeartbeatRequest{Group: "nope", Member: "a", Epoch: 1}, fence.ErrUnknownMember},
		{"unknown member", HeartbeatRequest{Group: "g", Member: "b", Epoch: 1}, fence.ErrUnknownMember},
		{"epoch ahead", HeartbeatRequest{Group: "g", Member: "a", Epoch: fence.MemberEpoch(a.MemberEpoch) + 1}, fence.ErrFencedMember},
		{"epoch of an earlier incarnation", HeartbeatRequest{Group: "g", Member: "a", Epoch: 0}, fence.ErrFencedMember},
	}
	for _, c := range cases {
		if _, err := w.groups.Heartbeat(ctx, c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	if a, ok := fence.ActionOf(fence.ErrFencedMember); !ok || a != fence.Rejoin {
		t.Errorf("fenced member: action %v", a)
	}
	for _, req := range []JoinRequest{
		{Group: "", Topics: []string{"t"}},
		{Group: "g"},
		{Group: "g", Topics: []string{""}},
	} {
		if _, err := w.groups.Join(ctx, req); !errors.Is(err, wire.StatusInvalidArgument) {
			t.Errorf("join %+v: err %v, want invalid argument", req, err)
		}
	}
	// A leave of an earlier incarnation does not remove the current one.
	b := mustJoin(t, w, "g", "a", "t")
	if err := w.groups.Leave(ctx, "g", "a", fence.MemberEpoch(a.MemberEpoch)); err != nil {
		t.Fatal(err)
	}
	if known, _ := w.groups.Member("g", "a"); !known || b.MemberEpoch <= a.MemberEpoch {
		t.Fatalf("a stale leave removed the member (epochs %d, %d)", a.MemberEpoch, b.MemberEpoch)
	}
	// Leaving twice is not an error.
	for range 2 {
		if err := w.groups.Leave(ctx, "g", "a", 0); err != nil {
			t.Fatal(err)
		}
	}
}

// A topic deleted and created again under its name: its partitions are
// taken from their holders at once (the old owners are gone) and the new
// topic's are assigned, with its new id.
func TestGroupTopicRecreated(t *testing.T) {
	ctx := context.Background()
	w := newGroupWorld(t)
	old := w.createTopic("t", 2)
	a := mustJoin(t, w, "g", "a", "t")
	if len(a.Assignment) != 2 || a.Assignment[0].TopicID != old.id {
		t.Fatalf("assignment %+v", a.Assignment)
	}
	w.topics.mu.Lock()
	delete(w.topics.topics, "t")
	w.topics.mu.Unlock()
	a, err := w.groups.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "a", Epoch: fence.MemberEpoch(a.MemberEpoch)})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Assignment) != 0 {
		t.Fatalf("assignment of a deleted topic: %+v", a.Assignment)
	}
	fresh := w.createTopic("t", 3)
	a, err = w.groups.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "a", Epoch: fence.MemberEpoch(a.MemberEpoch)})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Assignment) != 3 || a.Assignment[0].TopicID != fresh.id {
		t.Fatalf("assignment after re-creation: %+v", a.Assignment)
	}
	for i, o := range fresh.owners {
		member, epoch, _ := o.Assignment("g")
		if member != "a" || epoch != fence.MemberEpoch(a.Assignment[i].AssignmentEpoch) {
			t.Errorf("owner of t/%d: assigned to %q at epoch %d", i, member, epoch)
		}
	}
}

// Group epochs are durable before anyone sees them: a join whose
// reservation cannot be synced fails and hands nothing out; after a
// restart every epoch is above every epoch handed out before. The sync
// happens outside the coordinator's lock.
func TestGroupEpochsAreReservedBeforeUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := newGroupWorld(t)
		w.createTopic("t", 1)
		boom := errors.New("sync failed")
		w.meta.SetSyncGate(func(context.Context) error { return boom })
		if _, err := w.groups.Join(ctx, JoinRequest{Group: "g", Member: "a", Topics: []string{"t"}}); !errors.Is(err, boom) {
			t.Fatalf("join with a failing sync: %v", err)
		}
		if known, _ := w.groups.Member("g", "a"); known {
			t.Fatal("a member joined without a durable epoch")
		}
		if l := w.groups.List(); len(l) != 0 {
			t.Fatalf("a failed join left a group behind: %+v", l)
		}

		// A sync that blocks does not block other groups.
		release := make(chan struct{})
		w.meta.SetSyncGate(func(ctx context.Context) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		joined := make(chan error, 1)
		go func() {
			_, err := w.groups.Join(ctx, JoinRequest{Group: "g", Member: "a", Topics: []string{"t"}})
			joined <- err
		}()
		synctest.Wait()
		select {
		case err := <-joined:
			t.Fatalf("joined before the reservation was durable: %v", err)
		default:
		}
		w.groups.List() // takes the lock
		close(release)
		if err := <-joined; err != nil {
			t.Fatal(err)
		}
		w.meta.SetSyncGate(nil)

		var highest uint64
		for range 40 { // beyond one reservation block
			a, err := w.groups.Join(ctx, JoinRequest{Group: "g", Member: "a", Topics: []string{"t"}})
			if err != nil {
				t.Fatal(err)
			}
			highest = max(highest, a.MemberEpoch)
		}
		w.restart()
		a, err := w.groups.Join(ctx, JoinRequest{Group: "g", Member: "a", Topics: []string{"t"}})
		if err != nil {
			t.Fatal(err)
		}
		if a.MemberEpoch <= highest {
			t.Fatalf("epoch %d after a restart, not above %d", a.MemberEpoch, highest)
		}
	})
}

func TestGroupRecordRoundTrip(t *testing.T) {
	r := groupRecord{assignor: wire.AssignorRoundRobin, reserved: 1 << 40, topics: []string{"a", "bb", ""},
		ids: []fence.TopicID{{1}, {2}, {}}}
	got, err := decodeGroupRecord(r.encode())
	if err != nil {
		t.Fatal(err)
	}
	if got.assignor != r.assignor || got.reserved != r.reserved || len(got.topics) != 3 || got.topics[1] != "bb" ||
		got.ids[1] != (fence.TopicID{2}) {
		t.Fatalf("round trip: %+v", got)
	}
	b := r.encode()
	for i := range len(b) {
		if _, err := decodeGroupRecord(b[:i]); err == nil {
			t.Fatalf("a prefix of %d bytes decoded", i)
		}
	}
	for _, bad := range [][]byte{append(b, 0), append([]byte{9}, b[1:]...), append([]byte{1, 7}, b[2:]...)} {
		if _, err := decodeGroupRecord(bad); !errors.Is(err, errGroupRecord) {
			t.Fatalf("% x: err %v", bad, err)
		}
	}
}
