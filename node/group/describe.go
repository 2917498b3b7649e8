package group

import (
	"slices"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// Describe returns a group's members, assignments with their epochs, its
// commit policy, and its progress on every partition of its topics. A group the node does
// not know is described as empty.
func (gs *Groups) Describe(name string) wire.DescribeGroupReply {
	out := wire.DescribeGroupReply{Group: name}
	gs.mu.Lock()
	g := gs.groups[name]
	if g == nil {
		gs.mu.Unlock()
		return out
	}
	out.State, out.Assignor, out.GroupEpoch = g.state(), g.assignor, uint64(g.epoch)
	out.Policy = policyToWire(g.policy)
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		gm := wire.GroupMember{
			MemberID: id, MemberEpoch: uint64(m.epoch), SessionTimeout: m.session,
			Topics: slices.Clone(m.topics), ClientID: m.clientID, Host: m.host,
		}
		for _, p := range sortedPartitions(m.held) {
			gm.Assignment = append(gm.Assignment, wire.AssignedPartition{
				Topic: p.topic, TopicID: p.id, Partition: p.index, AssignmentEpoch: uint64(m.held[p]),
			})
			if _, keep := m.target[p]; !keep {
				gm.Revoking = append(gm.Revoking, tpOf(p))
			}
		}
		for _, p := range sortedPartitions(m.target) {
			if _, held := m.held[p]; !held {
				gm.Pending = append(gm.Pending, tpOf(p))
			}
		}
		out.Members = append(out.Members, gm)
	}
	topics := slices.Clone(g.subscription())
	holders := make(map[wire.TopicPartition]string, len(g.holder))
	for p, id := range g.holder {
		holders[tpOf(p)] = id
	}
	gs.mu.Unlock()

	// Offsets are read outside the lock: each owner answers for its own.
	for _, t := range topics {
		_, parts, ok := gs.cfg.Topics.GroupTopic(t)
		if !ok {
			continue
		}
		for i := range parts {
			o := gs.cfg.Topics.GroupOffset(t, uint32(i), name)
			o.MemberID = holders[wire.TopicPartition{Topic: t, Partition: uint32(i)}]
			out.Offsets = append(out.Offsets, o)
		}
	}
	return out
}

// List summarizes every group the node knows, by name.
func (gs *Groups) List() []wire.GroupSummary {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	out := make([]wire.GroupSummary, 0, len(gs.groups))
	for _, name := range sortedKeys(gs.groups) {
		g := gs.groups[name]
		out = append(out, wire.GroupSummary{
			Group: name, State: g.state(), Assignor: g.assignor, GroupEpoch: uint64(g.epoch),
			Members: uint32(len(g.members)), Topics: slices.Clone(g.subscription()),
		})
	}
	return out
}

// ResolveOffset reads a group's committed offset on a partition and
// resolves it in the partition's current history. The caller names the
// topic; on an error the offset says what is known of the partition.
func ResolveOffset(id fence.TopicID, partition uint32, log owner.PartitionLog, group string) (wire.GroupOffset, error) {
	st := log.State()
	out := wire.GroupOffset{Partition: partition, Resolved: st.LogStart, HighWatermark: st.HighWatermark}
	b, ok, err := log.Bookmark(owner.GroupBookmarkKey(group))
	if err != nil || !ok {
		return out, err
	}
	out.HasOffset, out.Offset, out.History = true, b.Offset, uint64(b.History)
	p := fence.Partition{Topic: id, Index: partition, History: st.History, LogStart: st.LogStart, HighWatermark: st.HighWatermark}
	res, err := fence.ResolveBookmark(p, log.Lineage(), b.Offset, b.History)
	if err != nil {
		return out, err
	}
	if res.Outcome == fence.ResumeAt {
		out.Resolved = res.Offset
	}
	return out, nil
}
