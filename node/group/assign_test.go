package group

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

func render(out map[string][]groupPartition, members []assignMember) string {
	s := ""
	for _, m := range members {
		s += m.id + ":"
		for _, p := range out[m.id] {
			s += fmt.Sprintf(" %s%d", p.topic, p.index)
		}
		s += "\n"
	}
	return s
}

func newMembers(topics []string, ids ...string) []assignMember {
	var out []assignMember
	for _, id := range ids {
		out = append(out, assignMember{id: id, topics: topics, previous: map[groupPartition]struct{}{}})
	}
	return out
}

// From nothing, range gives contiguous ranges per topic (the first
// members one more) and round-robin deals the partitions in turn.
func TestAssignorsFromNothing(t *testing.T) {
	topics := []topicMeta{{name: "t", partitions: 7}, {name: "u", partitions: 2}}
	members := newMembers([]string{"t", "u"}, "a", "b", "c")
	got := render(assignRange(members, topics), members)
	want := "a: t0 t1 t2 u0\nb: t3 t4 u1\nc: t5 t6\n"
	if got != want {
		t.Errorf("range:\n%s\nwant\n%s", got, want)
	}
	got = render(assignRoundRobin(members, topics), members)
	want = "a: t0 t3 t6\nb: t1 t4 u0\nc: t2 t5 u1\n"
	if got != want {
		t.Errorf("round-robin:\n%s\nwant\n%s", got, want)
	}
}

// The properties every target has, for both assignors and any members,
// subscriptions and previous targets: every partition of a subscribed
// topic goes to exactly one subscriber; with one subscription for all,
// counts differ by at most one (per topic for range); and every member
// keeps min(its previous count, its quota) of its previous partitions, so
// only what balance requires moves.
func TestAssignorProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a := rapid.SampledFrom([]wire.GroupAssignor{wire.AssignorRange, wire.AssignorRoundRobin}).Draw(rt, "assignor")
		names := []string{"t", "u", "v"}
		var topics []topicMeta
		for _, n := range names {
			topics = append(topics, topicMeta{name: n, partitions: uint32(rapid.IntRange(0, 9).Draw(rt, "partitions "+n))})
		}
		same := rapid.Bool().Draw(rt, "one subscription")
		nm := rapid.IntRange(1, 6).Draw(rt, "members")
		var members []assignMember
		for i := range nm {
			subs := names
			if !same {
				subs = nil
				for _, n := range names {
					if rapid.Bool().Draw(rt, fmt.Sprintf("m%d subscribes %s", i, n)) {
						subs = append(subs, n)
					}
				}
			}
			members = append(members, assignMember{id: fmt.Sprintf("m%d", i), topics: subs, previous: map[groupPartition]struct{}{}})
		}
		// Previous targets: some valid earlier layout, with members
		// joining and leaving since.
		prevMembers := slices.Clone(members)
		prevMembers = append(prevMembers, assignMember{id: "gone", topics: names, previous: map[groupPartition]struct{}{}})
		rapid.Permutation(prevMembers).Draw(rt, "earlier order")
		prev := assign(a, sortMembers(prevMembers), topics)
		for i := range members {
			if rapid.Bool().Draw(rt, fmt.Sprintf("m%d is new", i)) {
				continue
			}
			for _, p := range prev[members[i].id] {
				members[i].previous[p] = struct{}{}
			}
		}

		out := assign(a, members, topics)
		holder := map[groupPartition]string{}
		for _, m := range members {
			for _, p := range out[m.id] {
				if h, dup := holder[p]; dup {
					rt.Fatalf("%v goes to %s and %s", p, h, m.id)
				}
				if !m.subscribes(p.topic) {
					rt.Fatalf("%v goes to %s, which does not subscribe", p, m.id)
				}
				holder[p] = m.id
			}
		}
		for _, tm := range topics {
			subscribed := false
			for _, m := range members {
				subscribed = subscribed || m.subscribes(tm.name)
			}
			for i := range tm.partitions {
				if _, ok := holder[tm.partition(i)]; subscribed && !ok {
					rt.Fatalf("%s/%d is subscribed but not assigned", tm.name, i)
				}
			}
		}
		if !same {
			return
		}
		var counts []int
		if a == wire.AssignorRange {
			for _, tm := range topics {
				counts = counts[:0]
				for _, m := range members {
					n := 0
					for _, p := range out[m.id] {
						if p.topic == tm.name {
							n++
						}
					}
					counts = append(counts, n)
				}
				checkBalanced(rt, tm.name, counts)
			}
		} else {
			for _, m := range members {
				counts = append(counts, len(out[m.id]))
			}
			checkBalanced(rt, "all", counts)
		}
		// Stickiness: a member keeps as many previous partitions as it
		// can keep while balanced.
		for _, m := range members {
			kept, had := 0, len(m.previous)
			for _, p := range out[m.id] {
				if _, ok := m.previous[p]; ok {
					kept++
				}
			}
			if a == wire.AssignorRoundRobin && kept < min(had, len(out[m.id])) {
				rt.Fatalf("%s kept %d of its %d partitions with %d now", m.id, kept, had, len(out[m.id]))
			}
			if a != wire.AssignorRange {
				continue
			}
			for _, tm := range topics {
				kept, had, now := 0, 0, 0
				for p := range m.previous {
					if p.topic == tm.name {
						had++
					}
				}
				for _, p := range out[m.id] {
					if p.topic != tm.name {
						continue
					}
					now++
					if _, ok := m.previous[p]; ok {
						kept++
					}
				}
				if kept < min(had, now) {
					rt.Fatalf("%s kept %d of its %d partitions of %s with %d now", m.id, kept, had, tm.name, now)
				}
			}
		}
	})
}

func sortMembers(ms []assignMember) []assignMember {
	slices.SortFunc(ms, func(a, b assignMember) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return ms
}

func checkBalanced(rt *rapid.T, what string, counts []int) {
	if len(counts) == 0 {
		return
	}
	if slices.Max(counts)-slices.Min(counts) > 1 {
		rt.Fatalf("%s: counts %v are not balanced", what, counts)
	}
}

// A member joining a balanced group of two over 12 partitions takes four,
// two from each: the fewest moves balance allows.
func TestAssignorsMoveTheFewest(t *testing.T) {
	for _, a := range []wire.GroupAssignor{wire.AssignorRange, wire.AssignorRoundRobin} {
		topics := []topicMeta{{name: "t", partitions: 12}}
		two := newMembers([]string{"t"}, "a", "b")
		prev := assign(a, two, topics)
		three := newMembers([]string{"t"}, "a", "b", "c")
		for i := range 2 {
			for _, p := range prev[three[i].id] {
				three[i].previous[p] = struct{}{}
			}
		}
		out := assign(a, three, topics)
		moved := 0
		for _, m := range three {
			for _, p := range out[m.id] {
				if _, ok := m.previous[p]; !ok {
					moved++
				}
			}
		}
		if moved != 4 {
			t.Errorf("%s: %d partitions moved, want 4:\n%s", a, moved, render(out, three))
		}
	}
}
