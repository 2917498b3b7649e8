package session

import (
	"context"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// Handlers of the group requests (kinds 0x0040–0x0045), served by the
// node's coordinator.

// JoinGroup serves a join from the session's connection, whose remote
// IP address the member records.
func (r *Call) JoinGroup(ctx context.Context, m *wire.JoinGroupRequest) (*wire.JoinGroupReply, error) {
	for _, t := range m.Topics {
		if err := r.allow(t, wire.ScopeConsume); err != nil {
			return nil, err
		}
	}
	if err := refuseTransformGroup(m.Group, "joined"); err != nil {
		return nil, err
	}
	a, err := r.s.n.Groups().Join(ctx, group.JoinRequest{
		Group: m.Group, Member: m.MemberID, Topics: m.Topics, Assignor: m.Assignor,
		SessionTimeout: m.SessionTimeout, RebalanceTimeout: m.RebalanceTimeout,
		ClientID: m.ClientID, Host: r.s.host,
	})
	if err != nil {
		return nil, err
	}
	return &wire.JoinGroupReply{MemberAssignment: a}, nil
}

func (r *Call) Heartbeat(ctx context.Context, m *wire.HeartbeatRequest) (*wire.HeartbeatReply, error) {
	if err := r.allow("", wire.ScopeConsume); err != nil {
		return nil, err
	}
	a, err := r.s.n.Groups().Heartbeat(ctx, group.HeartbeatRequest{
		Group: m.Group, Member: m.MemberID, Epoch: fence.MemberEpoch(m.MemberEpoch), Owned: m.Owned,
	})
	if err != nil {
		return nil, err
	}
	return &wire.HeartbeatReply{MemberAssignment: a}, nil
}

func (r *Call) LeaveGroup(ctx context.Context, m *wire.LeaveGroupRequest) (*wire.LeaveGroupReply, error) {
	if err := r.allow("", wire.ScopeConsume); err != nil {
		return nil, err
	}
	if err := r.s.n.Groups().Leave(ctx, m.Group, m.MemberID, fence.MemberEpoch(m.MemberEpoch)); err != nil {
		return nil, err
	}
	return &wire.LeaveGroupReply{}, nil
}

func (r *Call) DescribeGroup(_ context.Context, m *wire.DescribeGroupRequest) (*wire.DescribeGroupReply, error) {
	if err := r.allow("", wire.ScopeConsume); err != nil {
		return nil, err
	}
	d := r.s.n.Groups().Describe(m.Group)
	if !m.WithSkipped {
		// A client that did not ask may not know the field.
		for i := range d.Offsets {
			d.Offsets[i].Skipped = 0
		}
	}
	return &d, nil
}

func (r *Call) ListGroups(_ context.Context, _ *wire.ListGroupsRequest) (*wire.ListGroupsReply, error) {
	if err := r.allow("", wire.ScopeConsume); err != nil {
		return nil, err
	}
	return &wire.ListGroupsReply{Groups: r.s.n.Groups().List()}, nil
}

func (r *Call) DeleteGroup(ctx context.Context, m *wire.DeleteGroupRequest) (*wire.DeleteGroupReply, error) {
	if err := r.allow("", wire.ScopeAdmin); err != nil {
		return nil, err
	}
	if err := refuseTransformGroup(m.Group, "deleted"); err != nil {
		return nil, err
	}
	if err := r.s.n.Groups().Delete(ctx, m.Group); err != nil {
		return nil, err
	}
	r.s.n.GroupDeleted(m.Group)
	return &wire.DeleteGroupReply{}, nil
}

// GroupOffset reads a group's committed offset on a partition of n,
// resolved in the partition's current history; an error becomes the
// offset's status.
func GroupOffset(n Node, topic string, partition uint32, group string) wire.GroupOffset {
	out := wire.GroupOffset{Topic: topic, Partition: partition}
	tp, err := n.Lookup(topic, [16]byte{})
	var ow *owner.Owner
	if err == nil {
		ow, err = tp.Owner(partition)
	}
	if err != nil {
		out.Status, out.Message = StatusOf(err)
		return out
	}
	o := groupOffsetOf(tp.ID, partition, tp.Logs[partition], group)
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
