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
	// ClientID is the client id the member joined with (WithGroupClientID;
	// a Kafka client's client.id), Host the IP address it connects from;
	// either is "" when unknown.
	ClientID string
	Host     string
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
	// records from there to the end: the offsets, less the Skipped ones
	// that a recovery after a crash skipped and that hold no record (a
	// node too old to say reports none skipped).
	Resume  uint64
	Lag     uint64
	Skipped uint64
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
	// Policy is the commit policy plugin attached to the group
	// (SetGroupCommitPolicy), "" for none; PolicyParams its parameters.
	Policy       string
	PolicyParams map[string]string
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
	req := &wire.DescribeGroupRequest{Group: group, WithSkipped: true}
	if err := c.callOptional(ctx, req, &wire.DescribeGroupRequest{Group: group}, &reply); err != nil {
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
		gm := GroupMember{ID: m.MemberID, Epoch: m.MemberEpoch, ClientID: m.ClientID, Host: m.Host,
			Topics: m.Topics, Revoking: tps(m.Revoking), Pending: tps(m.Pending)}
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
	if r.Policy.Name != "" {
		d.Policy = r.Policy.Name
		for _, p := range r.Policy.Params {
			if d.PolicyParams == nil {
				d.PolicyParams = map[string]string{}
			}
			d.PolicyParams[p.Key] = p.Value
		}
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
			g.Skipped = min(o.Skipped, o.HighWatermark-o.Resolved)
			g.Lag = o.HighWatermark - o.Resolved - g.Skipped
		}
		d.Offsets = append(d.Offsets, g)
	}
	return d
}

// SetGroupCommitPolicy attaches the commit policy plugin policy, with its
// parameters, to the consumer group called group: from then on each poll
// of every member runs the policy on what the poll delivered, and the
// node commits what it proposes with that poll's token — applied only
// while the member still holds the partition under the same assignment,
// so a proposal from a fenced member, or one whose partition moved, is
// dropped. The policy is kept with the group across node restarts; a
// group that does not exist yet is created, empty. An empty policy
// detaches it. A group's policy is separate from a named consumer's
// (SetCommitPolicy) of the same name. Needs the admin scope.
//
// Offsets never move backwards, so the policy decides only for members
// that leave committing to it: those created without WithDelivery while
// the group has the policy (they follow it), or with
// WithDelivery(CommitByPolicy).
func (c *Client) SetGroupCommitPolicy(ctx context.Context, group, policy string, params map[string]string) error {
	req := &wire.SetPolicyRequest{Target: wire.PolicyGroup, Name: group, Policy: filterToWire(policy, params)}
	return c.call(ctx, req, &wire.SetPolicyReply{})
}

// DeleteGroup deletes the consumer group called group: its committed
// offsets on every partition, its commit policy and the group itself; a
// group created later under the name starts from scratch. A group with
// members is refused with StatusInvalidArgument (close its consumers, or
// let their sessions expire, and delete again), as is a group the node
// does not know. Needs the admin scope.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	return c.call(ctx, &wire.DeleteGroupRequest{Group: group}, &wire.DeleteGroupReply{})
}
