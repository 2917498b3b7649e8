package group

import (
	"cmp"
	"slices"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// The group's target assignment: which member should hold which
// partition. Both assignors are pure functions of the members (sorted by
// id, with their subscriptions and previous targets) and the topics, and
// both are sticky: a member keeps as many of its previous partitions as
// its quota allows, and only the rest move. For a group that starts from
// nothing they give the classic layouts: contiguous ranges per topic
// (range), partitions dealt out in turn (round-robin).

// groupPartition is one partition of one creation of a topic. The topic
// id is part of it, so the partitions of a topic re-created under the
// same name are other partitions.
type groupPartition struct {
	topic string
	id    fence.TopicID
	index uint32
}

func comparePartitions(a, b groupPartition) int {
	if c := cmp.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.index, b.index)
}

// topicMeta is what the coordinator knows of a live topic.
type topicMeta struct {
	name       string
	id         fence.TopicID
	partitions uint32
}

func (t topicMeta) partition(i uint32) groupPartition {
	return groupPartition{topic: t.name, id: t.id, index: i}
}

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id       string
	topics   []string // sorted
	previous map[groupPartition]struct{}
}

func (m *assignMember) subscribes(topic string) bool {
	_, ok := slices.BinarySearch(m.topics, topic)
	return ok
}

// assign computes the target of every member (sorted by id) over the
// topics (sorted by name). Every partition of a topic some member
// subscribes to goes to exactly one subscriber.
func assign(a wire.GroupAssignor, members []assignMember, topics []topicMeta) map[string][]groupPartition {
	if a == wire.AssignorRoundRobin {
		return assignRoundRobin(members, topics)
	}
	return assignRange(members, topics)
}

// quotas splits n partitions over len(prev) members: each gets n/m, and
// the n%m extra ones go first to members that held more than n/m before
// (most first), then in member order — so a rebalance keeps extras where
// they are, and a new group gets the classic layout.
func quotas(n int, prev []int) []int {
	m := len(prev)
	q, extra := n/m, n%m
	out := make([]int, m)
	for i := range out {
		out[i] = q
	}
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ah, bh := prev[a] > q, prev[b] > q
		switch {
		case ah && !bh:
			return -1
		case bh && !ah:
			return 1
		case ah && bh:
			return cmp.Compare(prev[b], prev[a])
		}
		return 0
	})
	for _, i := range order[:extra] {
		out[i]++
	}
	return out
}

// assignRange gives each subscriber of a topic a quota of its partitions:
// first the ones it had (lowest first), then the free ones in ascending
// order, member after member.
func assignRange(members []assignMember, topics []topicMeta) map[string][]groupPartition {
	out := make(map[string][]groupPartition, len(members))
	for _, t := range topics {
		var subs []int
		for i := range members {
			if members[i].subscribes(t.name) {
				subs = append(subs, i)
			}
		}
		if len(subs) == 0 || t.partitions == 0 {
			continue
		}
		n := int(t.partitions)
		prev := make([]int, len(subs))
		for j, i := range subs {
			for p := range members[i].previous {
				if p.topic == t.name && p.id == t.id && p.index < t.partitions {
					prev[j]++
				}
			}
		}
		quota := quotas(n, prev)
		taken := make([]bool, n)
		got := make([][]groupPartition, len(subs))
		for j, i := range subs {
			for p := range n {
				if len(got[j]) == quota[j] {
					break
				}
				gp := t.partition(uint32(p))
				if _, had := members[i].previous[gp]; had && !taken[p] {
					taken[p] = true
					got[j] = append(got[j], gp)
				}
			}
		}
		next := 0
		for j := range subs {
			for len(got[j]) < quota[j] {
				for next < n && taken[next] {
					next++
				}
				if next == n {
					break
				}
				taken[next] = true
				got[j] = append(got[j], t.partition(uint32(next)))
			}
		}
		for j, i := range subs {
			out[members[i].id] = append(out[members[i].id], got[j]...)
		}
	}
	for id := range out {
		slices.SortFunc(out[id], comparePartitions)
	}
	return out
}

// assignRoundRobin balances all subscribed partitions over the members: a
// member keeps its previous partitions up to its quota, and each free
// partition, in topic and partition order, goes to the subscriber with
// the fewest (the first in member order on a tie).
func assignRoundRobin(members []assignMember, topics []topicMeta) map[string][]groupPartition {
	out := make(map[string][]groupPartition, len(members))
	if len(members) == 0 {
		return out
	}
	var all []groupPartition
	for _, t := range topics {
		for _, m := range members {
			if m.subscribes(t.name) {
				for p := range t.partitions {
					all = append(all, t.partition(p))
				}
				break
			}
		}
	}
	prev := make([]int, len(members))
	for i := range members {
		for _, p := range all {
			if _, had := members[i].previous[p]; had && members[i].subscribes(p.topic) {
				prev[i]++
			}
		}
	}
	quota := quotas(len(all), prev)
	holder := make(map[groupPartition]int, len(all))
	count := make([]int, len(members))
	for i := range members {
		for _, p := range all {
			if count[i] == quota[i] {
				break
			}
			if _, had := members[i].previous[p]; !had || !members[i].subscribes(p.topic) {
				continue
			}
			if _, taken := holder[p]; !taken {
				holder[p] = i
				count[i]++
			}
		}
	}
	for _, p := range all {
		if _, taken := holder[p]; taken {
			continue
		}
		best, bestUnder := -1, false
		for i := range members {
			if !members[i].subscribes(p.topic) {
				continue
			}
			under := count[i] < quota[i]
			if best < 0 || under && !bestUnder || under == bestUnder && count[i] < count[best] {
				best, bestUnder = i, under
			}
		}
		holder[p] = best
		count[best]++
	}
	for _, p := range all {
		id := members[holder[p]].id
		out[id] = append(out[id], p)
	}
	return out
}
