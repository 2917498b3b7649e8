package group

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// How long a rebalance takes to settle, in simulated time: members
// heartbeat every interval, each at its own phase, and a member that is
// told to give partitions up does so at once and confirms in an immediate
// heartbeat (as the SDK does). A rebalance has settled when the group is
// stable and every member's client holds its final assignment.

type settleMember struct {
	id     string
	epoch  fence.MemberEpoch
	owns   []wire.TopicPartition
	nextHB time.Duration
}

type settleSim struct {
	w       *groupWorld
	members []*settleMember
	now     time.Duration
	hb      time.Duration
}

func (s *settleSim) heartbeat(ctx context.Context, m *settleMember) error {
	a, err := s.w.groups.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: m.id, Epoch: m.epoch, Owned: m.owns})
	if err != nil {
		return err
	}
	s.take(m, a)
	return nil
}

// take adopts a reply; a revocation is carried out at once and confirmed
// by an immediate heartbeat.
func (s *settleSim) take(m *settleMember, a wire.MemberAssignment) {
	m.epoch = fence.MemberEpoch(a.MemberEpoch)
	var now []wire.TopicPartition
	for _, p := range a.Assignment {
		now = append(now, wire.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	revoked := false
	for _, o := range m.owns {
		revoked = revoked || !slices.Contains(now, o)
	}
	m.owns = now
	m.nextHB = s.now + s.hb
	if revoked {
		m.nextHB = s.now
	}
}

func (s *settleSim) settled() bool {
	gs := s.w.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groups["g"]
	if g.state() != wire.GroupStable {
		return false
	}
	for _, m := range s.members {
		if len(m.owns) != len(g.members[m.id].held) {
			return false
		}
	}
	return true
}

// run advances time in steps of 10 ms until the group settles (or, with
// idle > 0, for that long) and returns how long that took.
func (s *settleSim) run(ctx context.Context, t testing.TB, idle time.Duration) time.Duration {
	start := s.now
	for idle > 0 && s.now-start < idle || idle == 0 && !s.settled() {
		if s.now-start > time.Minute {
			t.Fatal("the rebalance did not settle within a minute")
		}
		for _, m := range s.members {
			for m.nextHB <= s.now {
				if err := s.heartbeat(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		if idle == 0 && s.settled() {
			break
		}
		s.now += 10 * time.Millisecond
		s.w.clock.Advance(10 * time.Millisecond)
	}
	return s.now - start
}

func (s *settleSim) join(ctx context.Context, t testing.TB, id string, a wire.GroupAssignor, phase time.Duration) {
	res, err := s.w.groups.Join(ctx, JoinRequest{Group: "g", Member: id, Topics: []string{"t"}, Assignor: a})
	if err != nil {
		t.Fatal(err)
	}
	m := &settleMember{id: id}
	s.members = append(s.members, m)
	s.take(m, res)
	m.nextHB = s.now + phase
}

// settleTimes runs a rebalance of a group over 12 partitions for many
// phase layouts: event happens at a random moment to a settled group of
// the members; it returns the settling times in heartbeat intervals.
func settleTimes(t testing.TB, a wire.GroupAssignor, before int, event func(ctx context.Context, s *settleSim, rnd *rand.Rand)) []float64 {
	ctx := context.Background()
	var out []float64
	for seed := range uint64(200) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		s := &settleSim{w: newGroupWorld(t), hb: time.Second}
		s.w.createTopic("t", 12)
		for i := range before {
			s.join(ctx, t, fmt.Sprintf("m%d", i), a, time.Duration(rnd.IntN(1000))*time.Millisecond)
		}
		s.run(ctx, t, 0)
		s.run(ctx, t, time.Duration(1+rnd.IntN(3000))*time.Millisecond)
		event(ctx, s, rnd)
		out = append(out, float64(s.run(ctx, t, 0))/float64(s.hb))
	}
	return out
}

func stats(xs []float64) (mean, p50, worst float64) {
	s := slices.Sorted(slices.Values(xs))
	for _, x := range s {
		mean += x
	}
	return mean / float64(len(s)), s[len(s)/2], s[len(s)-1]
}

// A third member joining a group of two over 12 partitions settles
// within two heartbeat intervals: each old member learns of the
// revocation at its next heartbeat and confirms at once; the new member
// receives the partitions at its next heartbeat after that. A member
// leaving settles within one. The figures are logged (go test -v).
func TestGroupRebalanceSettles(t *testing.T) {
	for _, a := range []wire.GroupAssignor{wire.AssignorRange, wire.AssignorRoundRobin} {
		joins := settleTimes(t, a, 2, func(ctx context.Context, s *settleSim, rnd *rand.Rand) {
			s.join(ctx, t, "m2", a, time.Duration(rnd.IntN(1000))*time.Millisecond)
		})
		leaves := settleTimes(t, a, 3, func(ctx context.Context, s *settleSim, _ *rand.Rand) {
			if err := s.w.groups.Leave(ctx, "g", "m0", 0); err != nil {
				t.Fatal(err)
			}
			s.members = s.members[1:]
		})
		for _, c := range []struct {
			what  string
			times []float64
			bound float64
		}{{"a third member joins", joins, 2}, {"one of three leaves", leaves, 1}} {
			mean, p50, worst := stats(c.times)
			t.Logf("%s, %s: settles in %.2f heartbeat intervals on average (median %.2f, worst %.2f)", a, c.what, mean, p50, worst)
			if worst > c.bound {
				t.Errorf("%s, %s: took %.2f heartbeat intervals, want at most %.0f", a, c.what, worst, c.bound)
			}
		}
	}
}
