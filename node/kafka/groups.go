package kafka

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The classic group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup) on Ledge's group coordinator, which assigns partitions on
// the node in the manner of KIP-848 and reconciles members incrementally.
//
// A Kafka member is a Ledge member of the group of the same name (a
// group is shared by both protocols). Its generation is its Ledge member
// epoch. No member is the group's leader: the node computes the
// assignment, and SyncGroup hands each member its own. A member whose
// assignment the node changed is told REBALANCE_IN_PROGRESS by its next
// heartbeat; it rejoins, stating in its subscription the partitions it
// still owns (none, for the eager protocols), which confirms the
// revocations the node asked for, exactly as a Ledge member's heartbeat
// does.

// leaderID names no member: every member follows, and the node assigns.
const leaderID = "ledge"

// classicGroups remembers what each classic member was told, and which
// partitions a group has committed "no position" on.
type classicGroups struct {
	mu      sync.Mutex
	members map[memberKey]*classicMember
	// unset holds the partitions whose latest commit was a negative
	// offset: Kafka stores it, and OffsetFetch returns it, so that the
	// client resets per its policy (kafkajs commits -1 or -2 when its
	// position fell out of the log, then asks where it is). The group's
	// stored position is left as it was, and this record is held in
	// memory only (docs/KAFKA.md says why): after a restart, a client at
	// an offset the log no longer holds meets OFFSET_OUT_OF_RANGE and
	// commits its reset again. Deleting the topic or the group drops
	// its records (Server.TopicDeleted, Server.GroupDeleted).
	unset map[unsetKey]struct{}
}

type unsetKey struct {
	group, topic string
	partition    int32
}

type memberKey struct{ group, member string }

type classicMember struct {
	protocol string
	// epoch is the member epoch it was last told (its generation).
	epoch uint64
	// owned is what the member said it owns when it last joined.
	owned []wire.TopicPartition
	// synced is the assignment its last SyncGroup handed it.
	synced []wire.TopicPartition
}

func newClassicGroups() *classicGroups {
	return &classicGroups{members: map[memberKey]*classicMember{}, unset: map[unsetKey]struct{}{}}
}

// setUnset records whether a group's latest commit on a partition was
// "no position".
func (g *classicGroups) setUnset(k unsetKey, unset bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if unset {
		g.unset[k] = struct{}{}
	} else {
		delete(g.unset, k)
	}
}

// forgetUnset drops the "no position" records that match.
func (g *classicGroups) forgetUnset(match func(unsetKey) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.unset {
		if match(k) {
			delete(g.unset, k)
		}
	}
}

func (g *classicGroups) isUnset(k unsetKey) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.unset[k]
	return ok
}

func (g *classicGroups) get(group, member string) (classicMember, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[memberKey{group, member}]
	if !ok {
		return classicMember{}, false
	}
	return *m, true
}

func (g *classicGroups) update(group, member string, fn func(*classicMember)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := memberKey{group, member}
	m := g.members[k]
	if m == nil {
		m = &classicMember{}
		g.members[k] = m
	}
	fn(m)
}

func (g *classicGroups) forget(group, member string) {
	g.mu.Lock()
	delete(g.members, memberKey{group, member})
	g.mu.Unlock()
}

func (cc *conn) joinGroup(ctx context.Context, m *kmsg.JoinGroupRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.JoinGroupResponse)
	r.Generation, r.MemberID, r.LeaderID = -1, m.MemberID, leaderID
	if m.ProtocolType != "consumer" || len(m.Protocols) == 0 {
		r.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return r
	}
	proto := m.Protocols[0]
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(proto.Metadata); err != nil || len(meta.Topics) == 0 {
		r.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return r
	}
	var owned []wire.TopicPartition
	for _, t := range meta.OwnedPartitions {
		for _, p := range t.Partitions {
			owned = append(owned, wire.TopicPartition{Topic: t.Topic, Partition: uint32(p)})
		}
	}
	var a wire.MemberAssignment
	if m.MemberID != "" {
		if cm, known := cc.s.groups.get(m.Group, m.MemberID); known {
			// A rejoin: the node keeps the member (and the partitions it
			// keeps), and takes what it owns now as its confirmation of
			// what it gave up.
			rep, err := cc.sess.Heartbeat(ctx, &wire.HeartbeatRequest{Group: m.Group, MemberID: m.MemberID, MemberEpoch: cm.epoch, Owned: owned})
			if err == nil {
				a = rep.MemberAssignment
			}
		}
	}
	if a.MemberID == "" {
		rep, err := cc.sess.JoinGroup(ctx, &wire.JoinGroupRequest{
			Group: m.Group, MemberID: m.MemberID, Topics: meta.Topics, ClientID: cc.clientID,
			SessionTimeout:   time.Duration(m.SessionTimeoutMillis) * time.Millisecond,
			RebalanceTimeout: time.Duration(m.RebalanceTimeoutMillis) * time.Millisecond,
		})
		if err != nil {
			r.ErrorCode = groupCode(err)
			return r
		}
		a = rep.MemberAssignment
	}
	cc.s.groups.update(m.Group, a.MemberID, func(cm *classicMember) {
		cm.protocol, cm.owned, cm.epoch = proto.Name, owned, a.MemberEpoch
	})
	cc.s.log.Debug("kafka: member joined", "group", m.Group, "member", a.MemberID, "generation", a.MemberEpoch, "owned", owned, "protocol", proto.Name)
	r.Generation, r.MemberID = int32(a.MemberEpoch), a.MemberID
	r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(proto.Name)
	return r
}

func (cc *conn) syncGroup(ctx context.Context, m *kmsg.SyncGroupRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.SyncGroupResponse)
	cm, ok := cc.s.groups.get(m.Group, m.MemberID)
	if !ok {
		r.ErrorCode = kerr.UnknownMemberID.Code
		return r
	}
	r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(cm.protocol)
	rep, err := cc.sess.Heartbeat(ctx, &wire.HeartbeatRequest{Group: m.Group, MemberID: m.MemberID, MemberEpoch: uint64(max(m.Generation, 0)), Owned: cm.owned})
	if err != nil {
		r.ErrorCode = cc.memberError(m.Group, m.MemberID, err)
		return r
	}
	// A partition received after the generation the member joined at
	// could not be committed under it (its assignment epoch is newer):
	// the member joins again to learn its new generation.
	for _, p := range rep.Assignment {
		if p.AssignmentEpoch > uint64(m.Generation) {
			r.ErrorCode = kerr.RebalanceInProgress.Code
			return r
		}
	}
	synced := partitionsOf(rep.Assignment)
	cc.s.log.Debug("kafka: member synced", "group", m.Group, "member", m.MemberID, "generation", m.Generation, "assignment", synced)
	cc.s.groups.update(m.Group, m.MemberID, func(cm *classicMember) { cm.synced = synced })
	r.MemberAssignment = encodeAssignment(rep.Assignment)
	return r
}

func (cc *conn) heartbeat(ctx context.Context, m *kmsg.HeartbeatRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.HeartbeatResponse)
	cm, ok := cc.s.groups.get(m.Group, m.MemberID)
	if !ok {
		r.ErrorCode = kerr.UnknownMemberID.Code
		return r
	}
	rep, err := cc.sess.Heartbeat(ctx, &wire.HeartbeatRequest{Group: m.Group, MemberID: m.MemberID, MemberEpoch: uint64(max(m.Generation, 0)), Owned: cm.synced})
	if err != nil {
		cc.s.log.Debug("kafka: heartbeat refused", "group", m.Group, "member", m.MemberID, "generation", m.Generation, "err", err)
		r.ErrorCode = cc.memberError(m.Group, m.MemberID, err)
		return r
	}
	if !slices.Equal(partitionsOf(rep.Assignment), cm.synced) {
		cc.s.log.Debug("kafka: member to rebalance", "group", m.Group, "member", m.MemberID, "generation", m.Generation, "assignment", partitionsOf(rep.Assignment), "synced", cm.synced)
		r.ErrorCode = kerr.RebalanceInProgress.Code
	}
	return r
}

func (cc *conn) leaveGroup(ctx context.Context, m *kmsg.LeaveGroupRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.LeaveGroupResponse)
	ids := []string{}
	if m.MemberID != "" {
		ids = append(ids, m.MemberID)
	}
	for _, mm := range m.Members {
		ids = append(ids, mm.MemberID)
	}
	for _, id := range ids {
		_, err := cc.sess.LeaveGroup(ctx, &wire.LeaveGroupRequest{Group: m.Group, MemberID: id})
		cc.s.groups.forget(m.Group, id)
		code := groupCode(err)
		if r.ErrorCode == 0 {
			r.ErrorCode = code
		}
		if m.Version >= 3 {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.ErrorCode = id, code
			r.Members = append(r.Members, rm)
		}
	}
	if m.Version >= 3 {
		r.ErrorCode = 0
	}
	return r
}

// memberError maps a heartbeat's error; a member the node no longer
// knows is forgotten here too (it rejoins under a new id).
func (cc *conn) memberError(group, member string, err error) int16 {
	code := groupCode(err)
	if code == kerr.UnknownMemberID.Code {
		cc.s.groups.forget(group, member)
	}
	return code
}

// groupCode maps an error of the coordinator to the classic protocol's.
func groupCode(err error) int16 {
	switch wire.StatusOf(err) {
	case wire.StatusOK:
		return 0
	case wire.StatusUnknownMember, wire.StatusFencedMember:
		return kerr.UnknownMemberID.Code
	case wire.StatusForbidden:
		return kerr.GroupAuthorizationFailed.Code
	case wire.StatusInvalidArgument:
		return kerr.InvalidRequest.Code
	}
	return codeOf(err)
}

// partitionsOf lists an assignment's partitions, sorted.
func partitionsOf(a []wire.AssignedPartition) []wire.TopicPartition {
	out := make([]wire.TopicPartition, 0, len(a))
	for _, p := range a {
		out = append(out, wire.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	slices.SortFunc(out, func(a, b wire.TopicPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition) - int(b.Partition)
	})
	return out
}

// encodeAssignment is the consumer protocol's assignment of partitions.
func encodeAssignment(a []wire.AssignedPartition) []byte {
	var ma kmsg.ConsumerMemberAssignment
	for _, p := range partitionsOf(a) {
		if n := len(ma.Topics); n == 0 || ma.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic = p.Topic
			ma.Topics = append(ma.Topics, t)
		}
		t := &ma.Topics[len(ma.Topics)-1]
		t.Partitions = append(t.Partitions, int32(p.Partition))
	}
	return ma.AppendTo(nil)
}
