package wire

import (
	"strconv"
	"time"
)

// Consumer groups (kinds 0x0040–0x0045). A member joins a group naming the
// topics it subscribes to; the node computes the group's target assignment
// and hands each member its share through heartbeats. A member confirms
// that it gave up a revoked partition by leaving it out of the partitions
// it says it owns in its next heartbeat; only then (or once its session
// expired) does the partition move. Polls and commits of a member carry
// Consumer{Kind: ConsumerMember} with its member id and epoch, and the
// node fences them by docs/FENCING.md's member rule.

// GroupAssignor names how a group's target assignment is computed.
type GroupAssignor uint8

// Assignors. Both are sticky: a rebalance keeps every partition whose
// member may keep it, and moves as few as balance allows.
const (
	// AssignorDefault asks for the node's default (range).
	AssignorDefault GroupAssignor = 0
	// AssignorRange gives each member contiguous ranges of each topic's
	// partitions (co-partitioned topics go to the same member).
	AssignorRange GroupAssignor = 1
	// AssignorRoundRobin deals all subscribed partitions out in turn.
	AssignorRoundRobin GroupAssignor = 2
	groupAssignorMax                 = AssignorRoundRobin
)

// String returns the assignor's name as the CLI spells it.
func (a GroupAssignor) String() string {
	switch a {
	case AssignorDefault:
		return "default"
	case AssignorRange:
		return "range"
	case AssignorRoundRobin:
		return "round-robin"
	}
	return "assignor(" + strconv.Itoa(int(a)) + ")"
}

// GroupState summarizes a group.
type GroupState uint8

// Group states.
const (
	// GroupEmpty: no members (the group has committed offsets only).
	GroupEmpty GroupState = 0
	// GroupStable: every member holds exactly its target assignment.
	GroupStable GroupState = 1
	// GroupReconciling: some member has partitions to give up or to
	// receive.
	GroupReconciling GroupState = 2
	groupStateMax               = GroupReconciling
)

// String returns the state's name.
func (s GroupState) String() string {
	switch s {
	case GroupEmpty:
		return "empty"
	case GroupStable:
		return "stable"
	case GroupReconciling:
		return "reconciling"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

func putTopicPartitions(w *fieldWriter, ps []TopicPartition, field string) {
	w.count(len(ps), field)
	for i := range ps {
		w.str16(ps[i].Topic, MaxNameLen, "topic")
		w.u32(ps[i].Partition)
	}
}

func getTopicPartitions(r *fieldReader, ps []TopicPartition, field string) []TopicPartition {
	ps = resize(ps, r.count(2+4, field))
	for i := range ps {
		r.str16(&ps[i].Topic, MaxNameLen, "topic")
		ps[i].Partition = r.u32("partition")
	}
	return ps
}

func putNames(w *fieldWriter, names []string, field string) {
	w.count(len(names), field)
	for _, n := range names {
		w.str16(n, MaxNameLen, field)
	}
}

func getNames(r *fieldReader, names []string, field string) []string {
	names = resize(names, r.count(2, field))
	for i := range names {
		r.str16(&names[i], MaxNameLen, field)
	}
	return names
}

// AssignedPartition is one partition a member holds, with the identity its
// fence tokens carry.
//
//	topic str16 | topic id [16] | partition u32 | assignment epoch u64
type AssignedPartition struct {
	Topic string
	// TopicID is the topic's identity: a poll names it so that a topic
	// re-created under the name is not read by mistake.
	TopicID   [16]byte
	Partition uint32
	// AssignmentEpoch is the member epoch at which the member received
	// the partition. A partition lost and received again comes back with
	// a new, higher one: work of the earlier assignment stays fenced.
	AssignmentEpoch uint64
}

const assignedPartitionMinSize = 2 + 16 + 4 + 8

func putAssigned(w *fieldWriter, ps []AssignedPartition) {
	w.count(len(ps), "assignment")
	for i := range ps {
		w.str16(ps[i].Topic, MaxNameLen, "topic")
		w.fixed(ps[i].TopicID[:])
		w.u32(ps[i].Partition)
		w.u64(ps[i].AssignmentEpoch)
	}
}

func getAssigned(r *fieldReader, ps []AssignedPartition) []AssignedPartition {
	ps = resize(ps, r.count(assignedPartitionMinSize, "assignment"))
	for i := range ps {
		r.str16(&ps[i].Topic, MaxNameLen, "topic")
		copy(ps[i].TopicID[:], r.fixed(16, "topic id"))
		ps[i].Partition = r.u32("partition")
		ps[i].AssignmentEpoch = r.u64("assignment epoch")
	}
	return ps
}

// MemberAssignment is what join and heartbeat replies carry: the member's
// identity now and the partitions it is to hold. A partition the member
// holds and Assignment leaves out is revoked: the member stops polling
// it, commits what it processed, and confirms by leaving it out of Owned
// in its next heartbeat (sent at once, not after the interval).
//
//	member id str16 | member epoch u64 | heartbeat interval dur |
//	session timeout dur | assignment list<AssignedPartition>
type MemberAssignment struct {
	MemberID string
	// MemberEpoch goes into every poll and commit of the member
	// (Consumer.MemberEpoch) and into its next heartbeat.
	MemberEpoch uint64
	// HeartbeatInterval is how often the member heartbeats.
	HeartbeatInterval time.Duration
	// SessionTimeout is the effective session timeout: a member silent
	// for this long is removed and its partitions move.
	SessionTimeout time.Duration
	// Assignment is the partitions the member is to hold, by topic and
	// partition.
	Assignment []AssignedPartition
}

func (m *MemberAssignment) put(w *fieldWriter) {
	w.str16(m.MemberID, MaxNameLen, "member id")
	w.u64(m.MemberEpoch)
	w.duration(m.HeartbeatInterval, "heartbeat interval")
	w.duration(m.SessionTimeout, "session timeout")
	putAssigned(w, m.Assignment)
}

func (m *MemberAssignment) get(r *fieldReader) {
	r.str16(&m.MemberID, MaxNameLen, "member id")
	m.MemberEpoch = r.u64("member epoch")
	m.HeartbeatInterval = r.duration("heartbeat interval")
	m.SessionTimeout = r.duration("session timeout")
	m.Assignment = getAssigned(r, m.Assignment)
}

// JoinGroupRequest makes the sender a member of a group. A member id the
// group knows joins as a new incarnation: the node takes it that the
// member holds nothing any more, and every partition of its earlier
// incarnation is released at once. An empty member id asks the node to
// pick one.
//
//	group str16 | member id str16 | assignor u8 | flags u8 |
//	session timeout dur | rebalance timeout dur | topics list<str16> |
//	[client id str16, when flags bit 0 is set]
//
// The flags byte was reserved (zero) in the first layout: a request
// without a client id is encoded as before, and decodes the same.
type JoinGroupRequest struct {
	Group    string
	MemberID string
	// Assignor is the group's assignor; the first member's choice stands
	// while the group has members (AssignorDefault: the node's).
	Assignor GroupAssignor
	// SessionTimeout is how long the node keeps a silent member (0: the
	// node's default; the node bounds it).
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the member may take to give up a
	// revoked partition before the node removes it (0: the node's
	// default).
	RebalanceTimeout time.Duration
	// Topics are the topics the member subscribes to.
	Topics []string
	// ClientID names the member's program for operators (group describe,
	// the status page); the node does not interpret it. Empty: none.
	ClientID string
}

// joinFlagClientID marks a join request that ends with a client id.
const joinFlagClientID = 1

// Kind implements Message.
func (*JoinGroupRequest) Kind() Kind { return KindJoinGroup }

// Encode implements Message.
func (m *JoinGroupRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "join-group")
	w.str16(m.Group, MaxNameLen, "group")
	w.str16(m.MemberID, MaxNameLen, "member id")
	w.enum(uint8(m.Assignor), uint8(groupAssignorMax), "assignor")
	var flags uint8
	if m.ClientID != "" {
		flags |= joinFlagClientID
	}
	w.u8(flags)
	w.duration(m.SessionTimeout, "session timeout")
	w.duration(m.RebalanceTimeout, "rebalance timeout")
	putNames(&w, m.Topics, "topics")
	if flags&joinFlagClientID != 0 {
		w.str16(m.ClientID, MaxNameLen, "client id")
	}
	return w.result()
}

// Decode implements Message.
func (m *JoinGroupRequest) Decode(b []byte) error {
	r := newFieldReader(b, "join-group")
	r.str16(&m.Group, MaxNameLen, "group")
	r.str16(&m.MemberID, MaxNameLen, "member id")
	m.Assignor = GroupAssignor(r.enum(uint8(groupAssignorMax), "assignor"))
	flags := r.enum(joinFlagClientID, "flags")
	m.SessionTimeout = r.duration("session timeout")
	m.RebalanceTimeout = r.duration("rebalance timeout")
	m.Topics = getNames(&r, m.Topics, "topics")
	m.ClientID = ""
	if flags&joinFlagClientID != 0 {
		r.str16(&m.ClientID, MaxNameLen, "client id")
		if m.ClientID == "" {
			r.fail("empty client id with its flag set")
		}
	}
	return r.finish()
}

// JoinGroupReply carries the member's id, epoch and first assignment.
//
//	member assignment
type JoinGroupReply struct {
	MemberAssignment
}

// Kind implements Message.
func (*JoinGroupReply) Kind() Kind { return KindJoinGroup }

// Encode implements Message.
func (m *JoinGroupReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "join-group reply")
	m.MemberAssignment.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *JoinGroupReply) Decode(b []byte) error {
	r := newFieldReader(b, "join-group reply")
	m.MemberAssignment.get(&r)
	return r.finish()
}

// HeartbeatRequest keeps a member's session alive, reports the partitions
// it holds and asks for its assignment. The member epoch is the last one
// the node gave it. A member the node no longer knows is answered with
// StatusUnknownMember, an epoch from another incarnation with
// StatusFencedMember: either way the member drops every partition (lost,
// not revoked: it commits nothing more) and joins again.
//
//	group str16 | member id str16 | member epoch u64 | owned list<topic str16 | partition u32>
type HeartbeatRequest struct {
	Group       string
	MemberID    string
	MemberEpoch uint64
	// Owned are the partitions the member holds now. Leaving out a
	// revoked partition confirms its revocation.
	Owned []TopicPartition
}

// Kind implements Message.
func (*HeartbeatRequest) Kind() Kind { return KindHeartbeat }

// Encode implements Message.
func (m *HeartbeatRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "heartbeat")
	w.str16(m.Group, MaxNameLen, "group")
	w.str16(m.MemberID, MaxNameLen, "member id")
	w.u64(m.MemberEpoch)
	putTopicPartitions(&w, m.Owned, "owned")
	return w.result()
}

// Decode implements Message.
func (m *HeartbeatRequest) Decode(b []byte) error {
	r := newFieldReader(b, "heartbeat")
	r.str16(&m.Group, MaxNameLen, "group")
	r.str16(&m.MemberID, MaxNameLen, "member id")
	m.MemberEpoch = r.u64("member epoch")
	m.Owned = getTopicPartitions(&r, m.Owned, "owned")
	return r.finish()
}

// HeartbeatReply carries the member's epoch and assignment now.
//
//	member assignment
type HeartbeatReply struct {
	MemberAssignment
}

// Kind implements Message.
func (*HeartbeatReply) Kind() Kind { return KindHeartbeat }

// Encode implements Message.
func (m *HeartbeatReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "heartbeat reply")
	m.MemberAssignment.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *HeartbeatReply) Decode(b []byte) error {
	r := newFieldReader(b, "heartbeat reply")
	m.MemberAssignment.get(&r)
	return r.finish()
}

// LeaveGroupRequest removes a member at once. The member has stopped
// polling and committed what it processed: its partitions move without
// waiting for a revocation.
//
//	group str16 | member id str16 | member epoch u64
type LeaveGroupRequest struct {
	Group       string
	MemberID    string
	MemberEpoch uint64
}

// Kind implements Message.
func (*LeaveGroupRequest) Kind() Kind { return KindLeaveGroup }

// Encode implements Message.
func (m *LeaveGroupRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "leave-group")
	w.str16(m.Group, MaxNameLen, "group")
	w.str16(m.MemberID, MaxNameLen, "member id")
	w.u64(m.MemberEpoch)
	return w.result()
}

// Decode implements Message.
func (m *LeaveGroupRequest) Decode(b []byte) error {
	r := newFieldReader(b, "leave-group")
	r.str16(&m.Group, MaxNameLen, "group")
	r.str16(&m.MemberID, MaxNameLen, "member id")
	m.MemberEpoch = r.u64("member epoch")
	return r.finish()
}

// LeaveGroupReply is empty.
type LeaveGroupReply struct{}

// Kind implements Message.
func (*LeaveGroupReply) Kind() Kind { return KindLeaveGroup }

// Encode implements Message.
func (m *LeaveGroupReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (m *LeaveGroupReply) Decode(b []byte) error {
	r := newFieldReader(b, "leave-group reply")
	return r.finish()
}
