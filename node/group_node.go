package node

import (
	"context"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// The coordinator inside a Node: the node's topics as GroupTopics, and the
// handlers of the group requests (kinds 0x0040–0x0045). A handler takes
// the request's authorization check (request.allow) and the decoded
// message, like the other handlers of the server.

// nodeGroupTopics is the node's live topics as the coordinator sees them.
type nodeGroupTopics struct{ n *Node }

// groupTopics returns the node's topics for OpenGroups.
func (n *Node) groupTopics() group.GroupTopics { return nodeGroupTopics{n} }

func (t nodeGroupTopics) GroupTopic(name string) (fence.TopicID, []group.PartitionAssigner, bool) {
	tp, err := t.n.lookup(name, [16]byte{})
	if err != nil || tp.deleted() {
		return fence.TopicID{}, nil, false
	}
	parts := make([]group.PartitionAssigner, len(tp.owners))
	for i, o := range tp.owners {
		parts[i] = o
	}
	return tp.id, parts, true
}

func (t nodeGroupTopics) GroupTopicNames() []string {
	ts := t.n.topicList()
	out := make([]string, 0, len(ts))
	for _, tp := range ts {
		if !tp.deleted() {
			out = append(out, tp.name)
		}
	}
	return out
}

func (t nodeGroupTopics) GroupOffset(topic string, partition uint32, group string) wire.GroupOffset {
	out := wire.GroupOffset{Topic: topic, Partition: partition}
	tp, err := t.n.lookup(topic, [16]byte{})
	var ow *owner.Owner
	if err == nil {
		ow, err = tp.owner(partition)
	}
	if err != nil {
		out.Status, out.Message = StatusOf(err)
		return out
	}
	o := groupOffsetOf(tp.id, partition, tp.logs[partition], group)
	o.Topic = topic
	if o.HighWatermark > o.Resolved {
		o.Skipped = ow.Skipped(o.Resolved, o.HighWatermark)
	}
	return o
}

// groupOffsetOf reads a group's committed offset on a partition and
// resolves it in the partition's current history; an error becomes the
// offset's status.
func groupOffsetOf(id fence.TopicID, partition uint32, log owner.PartitionLog, name string) wire.GroupOffset {
	out, err := group.ResolveOffset(id, partition, log, name)
	if err != nil {
		out.Status, out.Message = StatusOf(err)
	}
	return out
}

// authorize is a request's scope check (request.allow).
type authorize func(topic string, want wire.Scope) error

// serveJoin serves a join from a connection whose remote IP address is
// host ("" when unknown).
func serveJoin(gs *group.Groups, ctx context.Context, allow authorize, host string, m *wire.JoinGroupRequest) (*wire.JoinGroupReply, error) {
	for _, t := range m.Topics {
		if err := allow(t, wire.ScopeConsume); err != nil {
			return nil, err
		}
	}
	a, err := gs.Join(ctx, group.JoinRequest{
		Group: m.Group, Member: m.MemberID, Topics: m.Topics, Assignor: m.Assignor,
		SessionTimeout: m.SessionTimeout, RebalanceTimeout: m.RebalanceTimeout,
		ClientID: m.ClientID, Host: host,
	})
	if err != nil {
		return nil, err
	}
	return &wire.JoinGroupReply{MemberAssignment: a}, nil
}

func serveHeartbeat(gs *group.Groups, ctx context.Context, allow authorize, m *wire.HeartbeatRequest) (*wire.HeartbeatReply, error) {
	if err := allow("", wire.ScopeConsume); err != nil {
		return nil, err
	}
	a, err := gs.Heartbeat(ctx, group.HeartbeatRequest{
		Group: m.Group, Member: m.MemberID, Epoch: fence.MemberEpoch(m.MemberEpoch), Owned: m.Owned,
	})
	if err != nil {
		return nil, err
	}
	return &wire.HeartbeatReply{MemberAssignment: a}, nil
}

func serveLeave(gs *group.Groups, ctx context.Context, allow authorize, m *wire.LeaveGroupRequest) (*wire.LeaveGroupReply, error) {
	if err := allow("", wire.ScopeConsume); err != nil {
		return nil, err
	}
	if err := gs.Leave(ctx, m.Group, m.MemberID, fence.MemberEpoch(m.MemberEpoch)); err != nil {
		return nil, err
	}
	return &wire.LeaveGroupReply{}, nil
}

func serveDescribe(gs *group.Groups, _ context.Context, allow authorize, m *wire.DescribeGroupRequest) (*wire.DescribeGroupReply, error) {
	if err := allow("", wire.ScopeConsume); err != nil {
		return nil, err
	}
	d := gs.Describe(m.Group)
	if !m.WithSkipped {
		// A client that did not ask may not know the field.
		for i := range d.Offsets {
			d.Offsets[i].Skipped = 0
		}
	}
	return &d, nil
}

func serveList(gs *group.Groups, _ context.Context, allow authorize, _ *wire.ListGroupsRequest) (*wire.ListGroupsReply, error) {
	if err := allow("", wire.ScopeConsume); err != nil {
		return nil, err
	}
	return &wire.ListGroupsReply{Groups: gs.List()}, nil
}

// Groups returns the node's consumer-group coordinator, for the status
// page and metrics.
func (n *Node) Groups() *group.Groups { return n.groups }

func serveDelete(gs *group.Groups, ctx context.Context, allow authorize, m *wire.DeleteGroupRequest) (*wire.DeleteGroupReply, error) {
	if err := allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if err := gs.Delete(ctx, m.Group); err != nil {
		return nil, err
	}
	return &wire.DeleteGroupReply{}, nil
}
