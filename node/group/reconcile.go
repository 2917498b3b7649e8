package group

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// reconcile brings the group toward its target, as far as it can go now:
//
//  1. the target is computed again if membership, subscriptions or topics
//     changed, under a new group epoch;
//  2. a member behind the group epoch moves up to it once it holds
//     nothing outside its target; until then it keeps its epoch and every
//     partition it holds (it is asked to give some up, and may still
//     commit them), and it receives nothing new;
//  3. a member at the group epoch receives each partition of its target
//     that nobody holds, at its member epoch (the assignment epoch);
//  4. every partition whose holder changed is installed on its owner.
//
// Member epochs reach the view (Members) before the owners learn of new
// holders, and a removed member left the view before its partitions move.
// Called with gs.mu held.
func (gs *Groups) reconcile(g *group, now time.Time) {
	gs.refreshTopics(g)
	if g.dirty && len(g.members) > 0 {
		g.epoch++
		gs.computeTarget(g)
	}
	g.dirty = false
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		if m.epoch < g.epoch {
			if _, revoking := firstRevoking(m); revoking {
				if m.revokeBy.IsZero() {
					m.revokeBy = now.Add(m.rebalance)
				}
				continue
			}
			if m.joined == 0 {
				m.joined = g.epoch
			}
			m.epoch, m.revokeBy = g.epoch, time.Time{}
			gs.setView(g, m)
		}
		for _, p := range sortedPartitions(m.target) {
			if _, held := m.held[p]; held {
				continue
			}
			if _, taken := g.holder[p]; taken {
				continue
			}
			g.holder[p] = m.id
			m.held[p] = m.epoch
			g.changed[p] = struct{}{}
		}
	}
	gs.install(g)
}

// refreshTopics compares the subscribed topics with the live ones. A topic
// deleted or re-created under its name takes its partitions away from
// their holders at once (there is no owner left to hand them over), and
// the target is computed again. Called with gs.mu held.
func (gs *Groups) refreshTopics(g *group) {
	want := g.subscription()
	for _, name := range want {
		id, parts, ok := gs.cfg.Topics.GroupTopic(name)
		old, had := g.topics[name]
		now := topicMeta{name: name, id: id, partitions: uint32(len(parts))}
		switch {
		case !ok && had:
			delete(g.topics, name)
			gs.dropTopic(g, old)
			g.dirty = true
		case ok && (!had || old != now):
			if had {
				gs.dropTopic(g, old)
			}
			g.topics[name] = now
			g.dirty = true
		}
	}
	for name, old := range g.topics {
		if _, ok := slices.BinarySearch(want, name); !ok {
			delete(g.topics, name)
			gs.dropTopic(g, old)
			g.dirty = true
		}
	}
}

// dropTopic releases the partitions of one creation of a topic whose
// partitions are gone or beyond its partition count now.
func (gs *Groups) dropTopic(g *group, t topicMeta) {
	for _, p := range sortedPartitions(g.holder) {
		if p.topic == t.name && p.id == t.id {
			gs.release(g, p)
		}
	}
}

// computeTarget computes every member's target with the group's assignor,
// from the previous targets (stickiness). Called with gs.mu held.
func (gs *Groups) computeTarget(g *group) {
	ids := sortedKeys(g.members)
	in := make([]assignMember, len(ids))
	for i, id := range ids {
		m := g.members[id]
		in[i] = assignMember{id: id, topics: m.topics, previous: m.target}
	}
	topics := slices.SortedFunc(maps.Values(g.topics), func(a, b topicMeta) int { return cmp.Compare(a.name, b.name) })
	res := assign(g.assignor, in, topics)
	for _, id := range ids {
		t := make(map[groupPartition]struct{}, len(res[id]))
		for _, p := range res[id] {
			t[p] = struct{}{}
		}
		g.members[id].target = t
	}
}

// install runs, for every partition whose holder changed, the owner step
// that installs its new holder (or none). Called with gs.mu held.
func (gs *Groups) install(g *group) {
	if len(g.changed) == 0 {
		return
	}
	for _, p := range sortedPartitions(g.changed) {
		delete(g.changed, p)
		id, parts, ok := gs.cfg.Topics.GroupTopic(p.topic)
		if !ok || id != p.id || int(p.index) >= len(parts) {
			continue // the topic is gone: so is its owner
		}
		if holder, held := g.holder[p]; held {
			parts[p.index].Assign(g.name, holder, g.members[holder].held[p])
		} else {
			parts[p.index].Unassign(g.name)
		}
	}
}

// subscription is the union of the members' topics, sorted; for a group
// without members, the one last stored.
func (g *group) subscription() []string {
	if len(g.members) == 0 {
		return g.stored
	}
	var out []string
	for _, m := range g.members {
		out = append(out, m.topics...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// assignmentOf is what a member is told: its epoch and the partitions it
// is to hold (those it holds, minus those it is to give up).
func (gs *Groups) assignmentOf(g *group, m *member) wire.MemberAssignment {
	out := wire.MemberAssignment{
		MemberID: m.id, MemberEpoch: uint64(m.epoch),
		HeartbeatInterval: heartbeatInterval(gs.cfg.HeartbeatInterval, m.session), SessionTimeout: m.session,
	}
	for _, p := range sortedPartitions(m.held) {
		if _, keep := m.target[p]; keep {
			out.Assignment = append(out.Assignment, wire.AssignedPartition{
				Topic: p.topic, TopicID: p.id, Partition: p.index, AssignmentEpoch: uint64(m.held[p]),
			})
		}
	}
	return out
}

// heartbeatInterval is what a member with session is told to heartbeat
// at: the configured interval, or a third of its session when that is
// shorter, so that two heartbeats in a row can be late (a slow round
// trip, a busy member) before the session ends. A member with the
// minimum session (1 s) heartbeats every 333 ms.
func heartbeatInterval(configured, session time.Duration) time.Duration {
	return min(configured, session/3)
}

// state summarizes the group.
func (g *group) state() wire.GroupState {
	if len(g.members) == 0 {
		return wire.GroupEmpty
	}
	for _, m := range g.members {
		if m.epoch != g.epoch || len(m.held) != len(m.target) {
			return wire.GroupReconciling
		}
		for p := range m.target {
			if _, ok := m.held[p]; !ok {
				return wire.GroupReconciling
			}
		}
	}
	return wire.GroupStable
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func sortedPartitions[V any](m map[groupPartition]V) []groupPartition {
	return slices.SortedFunc(maps.Keys(m), comparePartitions)
}

func tpOf(p groupPartition) wire.TopicPartition {
	return wire.TopicPartition{Topic: p.topic, Partition: p.index}
}
