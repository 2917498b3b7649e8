package sdk

import (
	"context"

	"github.com/ledgemq/ledge/transport/wire"
)

// GroupState summarizes a consumer group: empty (no members), stable
// (every member holds its share) or reconciling (partitions are moving).
type GroupState = wire.GroupState

// Group states.
const (
	GroupEmpty       = wire.GroupEmpty
	GroupStable      = wire.GroupStable
	GroupReconciling = wire.GroupReconciling
)

// GroupSummary is one consumer group of a listing.
type GroupSummary struct {
	Name  string
	State GroupState
	// Assignor is how the group's partitions are shared out.
	Assignor Assignor
	// Epoch is the group epoch: it rises at every change of membership
	// or subscription.
	Epoch   uint64
	Members int
	Topics  []string
}

// AssignedPartition is a partition a member holds, with the member epoch
// at which it received it (its assignment epoch).
type AssignedPartition struct {
	TopicPartition
	AssignmentEpoch uint64
}

// GroupMember describes a member of a group.
type GroupMember struct {
	ID    string
	Epoch uint64
	// Topics is the member's subscription.
	Topics []string
	// Assigned are the partitions it holds; Revoking those of them it is
	// giving up; Pending those it is to receive once released.
	Assigned []AssignedPartition
	Revoking []TopicPartition
	Pending  []TopicPartition
}

// GroupOffset is a group's progress on one partition.
type GroupOffset struct {
	TopicPartition
	// Committed says whether the group committed on the partition; Offset
	// and History are then the committed offset and the history epoch it
	// was committed in.
	Committed bool
	Offset    uint64
	History   uint64
	// Resume is where the group resumes now (the committed offset in the
	// partition's current history, or its start without one); Lag is the
	// records from there to the end.
	Resume uint64
	Lag    uint64
	// Member holds the partition ("" when nobody does).
	Member string
	// Err is why the node could not describe the partition, or nil.
	Err error
}

// GroupDescription is a group's members, assignments and offsets.
type GroupDescription struct {
	GroupSummary
	Members []GroupMember
	Offsets []GroupOffset
}

// ListGroups lists the node's consumer groups by name.
func (c *Client) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	var reply wire.ListGroupsReply
	if err := c.call(ctx, &wire.ListGroupsRequest{}, &reply); err != nil {
		return nil, err
	}
	out := make([]GroupSummary, len(reply.Groups))
	for i, g := range reply.Groups {
		out[i] = GroupSummary{Name: g.Group, State: g.State, Assignor: g.Assignor, Epoch: g.GroupEpoch,
			Members: int(g.Members), Topics: g.Topics}
	}
	return out, nil
}

// DescribeGroup describes a consumer group: its members with their
// assignments and epochs, and its committed offsets and lag on every
// partition of its topics. A group the node does not know is described as
// empty.
func (c *Client) DescribeGroup(ctx context.Context, group string) (GroupDescription, error) {
	var reply wire.DescribeGroupReply
	if err := c.call(ctx, &wire.DescribeGroupRequest{Group: group}, &reply); err != nil {
		return GroupDescription{}, err
	}
	return describedGroup(&reply), nil
}

func describedGroup(r *wire.DescribeGroupReply) GroupDescription {
	d := GroupDescription{GroupSummary: GroupSummary{
		Name: r.Group, State: r.State, Assignor: r.Assignor, Epoch: r.GroupEpoch, Members: len(r.Members),
	}}
	tps := func(ps []wire.TopicPartition) []TopicPartition {
		var out []TopicPartition
		for _, p := range ps {
			out = append(out, TopicPartition{Topic: p.Topic, Partition: int32(p.Partition)})
		}
		return out
	}
	seen := map[string]bool{}
	for _, m := range r.Members {
		gm := GroupMember{ID: m.MemberID, Epoch: m.MemberEpoch, Topics: m.Topics, Revoking: tps(m.Revoking), Pending: tps(m.Pending)}
		for _, a := range m.Assignment {
			gm.Assigned = append(gm.Assigned, AssignedPartition{
				TopicPartition: TopicPartition{Topic: a.Topic, Partition: int32(a.Partition)}, AssignmentEpoch: a.AssignmentEpoch,
			})
		}
		for _, t := range m.Topics {
			if !seen[t] {
				seen[t] = true
				d.Topics = append(d.Topics, t)
			}
		}
		d.Members = append(d.Members, gm)
	}
	for _, o := range r.Offsets {
		if len(r.Members) == 0 && !seen[o.Topic] {
			seen[o.Topic] = true
			d.Topics = append(d.Topics, o.Topic)
		}
		g := GroupOffset{
			TopicPartition: TopicPartition{Topic: o.Topic, Partition: int32(o.Partition)},
			Committed:      o.HasOffset, Offset: o.Offset, History: o.History, Resume: o.Resolved, Member: o.MemberID,
			Err: statusError("describe-group", o.Topic, o.Partition, o.Status, o.Message),
		}
		if o.HighWatermark > o.Resolved {
			g.Lag = o.HighWatermark - o.Resolved
		}
		d.Offsets = append(d.Offsets, g)
	}
	return d
}
