package kafka

import (
	"context"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerGroupHeartbeat is KIP-848's protocol, which is Ledge's own: the
// node assigns, a member's epoch is its member epoch, and the partitions
// it says it owns confirm the revocations it was asked for. Epoch 0
// joins, a negative epoch leaves, any other heartbeats.
func (cc *conn) consumerGroupHeartbeat(ctx context.Context, m *kmsg.ConsumerGroupHeartbeatRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	r.MemberID, r.MemberEpoch = kmsg.StringPtr(m.MemberID), m.MemberEpoch
	fail := func(code int16, msg string) kmsg.Response {
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	}
	if m.MemberEpoch < 0 {
		_, err := cc.sess.LeaveGroup(ctx, &wire.LeaveGroupRequest{Group: m.Group, MemberID: m.MemberID})
		cc.s.groups.forget(m.Group, m.MemberID)
		r.ErrorCode = groupCode(err)
		return r
	}
	if m.SubscribedTopicRegex != nil {
		return fail(kerr.InvalidRequest.Code, "subscriptions by regular expression are not served")
	}
	ids, err := cc.topicNames(ctx)
	if err != nil {
		return fail(codeOf(err), err.Error())
	}
	cm, _ := cc.s.groups.get(m.Group, m.MemberID)
	owned := cm.owned
	if m.Topics != nil {
		owned = owned[:0:0]
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				owned = append(owned, wire.TopicPartition{Topic: ids[t.TopicID], Partition: uint32(p)})
			}
		}
	}
	var a wire.MemberAssignment
	if m.MemberEpoch == 0 {
		rep, err := cc.sess.JoinGroup(ctx, &wire.JoinGroupRequest{
			Group: m.Group, MemberID: m.MemberID, Topics: m.SubscribedTopicNames, ClientID: cc.clientID,
			RebalanceTimeout: time.Duration(m.RebalanceTimeoutMillis) * time.Millisecond,
		})
		if err != nil {
			return fail(groupCode(err), err.Error())
		}
		a = rep.MemberAssignment
	} else {
		rep, err := cc.sess.Heartbeat(ctx, &wire.HeartbeatRequest{Group: m.Group, MemberID: m.MemberID, MemberEpoch: uint64(m.MemberEpoch), Owned: owned})
		if err != nil {
			code := groupCode(err)
			if wire.StatusOf(err) == wire.StatusFencedMember {
				code = kerr.FencedMemberEpoch.Code
			}
			return fail(code, err.Error())
		}
		a = rep.MemberAssignment
	}
	cc.s.groups.update(m.Group, a.MemberID, func(cm *classicMember) { cm.owned, cm.epoch = owned, a.MemberEpoch })
	r.MemberID, r.MemberEpoch = kmsg.StringPtr(a.MemberID), int32(a.MemberEpoch)
	r.HeartbeatIntervalMillis = int32(a.HeartbeatInterval / time.Millisecond)
	asg := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	for _, p := range a.Assignment {
		if n := len(asg.Topics); n == 0 || asg.Topics[n-1].TopicID != p.TopicID {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID = p.TopicID
			asg.Topics = append(asg.Topics, t)
		}
		t := &asg.Topics[len(asg.Topics)-1]
		t.Partitions = append(t.Partitions, int32(p.Partition))
	}
	r.Assignment = &asg
	return r
}

// topicNames maps the ids of the topics the session sees to their names.
func (cc *conn) topicNames(ctx context.Context) (map[[16]byte]string, error) {
	list, err := cc.sess.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[[16]byte]string, len(list.Topics))
	for _, t := range list.Topics {
		out[t.ID] = t.Name
	}
	return out, nil
}
