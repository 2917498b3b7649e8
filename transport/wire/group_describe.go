package wire

import (
	"slices"
	"time"
)

// GroupMember describes one member of a group.
//
//	member id str16 | member epoch u64 | session timeout dur | topics list<str16> |
//	assignment list<AssignedPartition> | revoking list<TopicPartition> | pending list<TopicPartition> |
//	[client id str16 | host str16, when the reply's flags bit 0 is set]
type GroupMember struct {
	MemberID    string
	MemberEpoch uint64
	// SessionTimeout is the member's effective session timeout.
	SessionTimeout time.Duration
	// Topics are the member's subscription.
	Topics []string
	// Assignment is what the member holds now, with assignment epochs
	// (partitions being revoked included: the member may still commit
	// them until it confirms).
	Assignment []AssignedPartition
	// Revoking are held partitions the member is to give up.
	Revoking []TopicPartition
	// Pending are partitions of the member's target that another member
	// has not released yet.
	Pending []TopicPartition
	// ClientID is the client id the member joined with ("" when none).
	ClientID string
	// Host is the IP address the member's connection comes from ("" when
	// the node does not know it).
	Host string
}

func (m *GroupMember) hasClientInfo() bool { return m.ClientID != "" || m.Host != "" }

const groupMemberMinSize = 2 + 8 + 8 + 4 + 4 + 4 + 4

func (m *GroupMember) put(w *fieldWriter, clientInfo bool) {
	w.str16(m.MemberID, MaxNameLen, "member id")
	w.u64(m.MemberEpoch)
	w.duration(m.SessionTimeout, "session timeout")
	putNames(w, m.Topics, "topics")
	putAssigned(w, m.Assignment)
	putTopicPartitions(w, m.Revoking, "revoking")
	putTopicPartitions(w, m.Pending, "pending")
	if clientInfo {
		w.str16(m.ClientID, MaxNameLen, "client id")
		w.str16(m.Host, MaxNameLen, "host")
	}
}

func (m *GroupMember) get(r *fieldReader, clientInfo bool) {
	r.str16(&m.MemberID, MaxNameLen, "member id")
	m.MemberEpoch = r.u64("member epoch")
	m.SessionTimeout = r.duration("session timeout")
	m.Topics = getNames(r, m.Topics, "topics")
	m.Assignment = getAssigned(r, m.Assignment)
	m.Revoking = getTopicPartitions(r, m.Revoking, "revoking")
	m.Pending = getTopicPartitions(r, m.Pending, "pending")
	m.ClientID, m.Host = "", ""
	if clientInfo {
		r.str16(&m.ClientID, MaxNameLen, "client id")
		r.str16(&m.Host, MaxNameLen, "host")
	}
}

// GroupOffset is a group's progress on one partition of its topics.
//
//	topic str16 | partition u32 | status u16 | message text | has offset bool |
//	offset u64 | history u64 | resolved u64 | high watermark u64 | member id str16 |
//	[skipped u64, when the reply's flags bit 1 is set]
type GroupOffset struct {
	Topic     string
	Partition uint32
	// Status is StatusOK, or why the partition could not be described.
	Status  Status
	Message string
	// HasOffset is false when the group never committed on the partition;
	// Offset and History are then zero.
	HasOffset bool
	// Offset is the committed offset, stamped with the history epoch it
	// was committed in.
	Offset  uint64
	History uint64
	// Resolved is where the group resumes now: the committed offset
	// resolved in the partition's current history (docs/FENCING.md), or
	// the log start without a usable one.
	Resolved uint64
	// HighWatermark is the partition's end; the lag is HighWatermark −
	// Resolved − Skipped.
	HighWatermark uint64
	// MemberID is the member holding the partition ("" when none does).
	MemberID string
	// Skipped is how many offsets in [Resolved, HighWatermark) hold no
	// record because a recovery skipped them. A reply carries it only when
	// the request asked (DescribeGroupRequest.WithSkipped).
	Skipped uint64
}

const groupOffsetMinSize = 2 + 4 + 2 + 2 + 1 + 4*8 + 2

func (o *GroupOffset) put(w *fieldWriter, skipped bool) {
	w.str16(o.Topic, MaxNameLen, "topic")
	w.u32(o.Partition)
	w.u16(uint16(o.Status))
	w.text(o.Message)
	w.bool8(o.HasOffset)
	if !o.HasOffset && (o.Offset != 0 || o.History != 0) {
		w.fail(StatusInvalidArgument, "offset %d@%d without HasOffset", o.Offset, o.History)
	}
	w.u64(o.Offset)
	w.u64(o.History)
	w.u64(o.Resolved)
	w.u64(o.HighWatermark)
	w.str16(o.MemberID, MaxNameLen, "member id")
	if skipped {
		w.u64(o.Skipped)
	}
}

func (o *GroupOffset) get(r *fieldReader, skipped bool) {
	r.str16(&o.Topic, MaxNameLen, "topic")
	o.Partition = r.u32("partition")
	o.Status = Status(r.u16("status"))
	r.str16(&o.Message, MaxTextLen, "message")
	o.HasOffset = r.bool8("has offset")
	o.Offset = r.u64("offset")
	o.History = r.u64("history")
	if !o.HasOffset && (o.Offset != 0 || o.History != 0) {
		r.fail("offset %d@%d without has-offset", o.Offset, o.History)
	}
	o.Resolved = r.u64("resolved")
	o.HighWatermark = r.u64("high watermark")
	r.str16(&o.MemberID, MaxNameLen, "member id")
	o.Skipped = 0
	if skipped {
		o.Skipped = r.u64("skipped")
	}
}

// DescribeGroupRequest asks for a group's members, assignments and
// committed offsets.
//
//	group str16 | [flags u8: bit 0 skipped; absent when zero]
//
// The flags are an optional last field, as in DescribeTopicRequest.
type DescribeGroupRequest struct {
	Group string
	// WithSkipped asks the node for the offsets a recovery skipped between
	// each partition's resume position and its end (GroupOffset.Skipped).
	WithSkipped bool
}

// Kind implements Message.
func (*DescribeGroupRequest) Kind() Kind { return KindDescribeGroup }

// Encode implements Message.
func (m *DescribeGroupRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "describe-group")
	w.str16(m.Group, MaxNameLen, "group")
	putDescribeFlags(&w, m.WithSkipped)
	return w.result()
}

// Decode implements Message.
func (m *DescribeGroupRequest) Decode(b []byte) error {
	r := newFieldReader(b, "describe-group")
	r.str16(&m.Group, MaxNameLen, "group")
	m.WithSkipped = getDescribeFlags(&r)
	return r.finish()
}

// DescribeGroupReply describes a group. A group the node does not know
// is described as empty, with no members and no offsets.
//
//	group str16 | state u8 | assignor u8 | flags u8 | reserved(1) | group epoch u64 |
//	members list<GroupMember> | offsets list<GroupOffset> | policy (as a poll's filter)
//
// Flags bit 0: members carry a client id and host; bit 1: offsets carry
// their skipped counts, set exactly when one is not zero. A node leaves
// the counts zero unless the request asked for them, so a client that
// does not know bit 1 never sees it.
type DescribeGroupReply struct {
	Group    string
	State    GroupState
	Assignor GroupAssignor
	// GroupEpoch is the epoch of the group's target assignment.
	GroupEpoch uint64
	// Members are sorted by member id.
	Members []GroupMember
	// Offsets cover every partition of the group's topics, by topic and
	// partition.
	Offsets []GroupOffset
	// Policy is the commit policy attached to the group (SetPolicyRequest
	// with PolicyGroup) and its parameters; Name is empty when none is.
	Policy Filter
}

// describeFlagClientInfo marks a describe reply whose members carry a
// client id and host. The flags byte was reserved (zero) in the first
// layout, which stays valid: its members have neither. The flag is set
// exactly when some member has one, so that each reply has one encoding.
const describeFlagClientInfo = 1

// describeFlagSkippedOffsets marks a describe reply whose offsets carry
// a skipped count; it is set exactly when one of them is not zero.
const describeFlagSkippedOffsets = 2

// Kind implements Message.
func (*DescribeGroupReply) Kind() Kind { return KindDescribeGroup }

// Encode implements Message.
func (m *DescribeGroupReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "describe-group reply")
	w.str16(m.Group, MaxNameLen, "group")
	w.enum(uint8(m.State), uint8(groupStateMax), "state")
	w.enum(uint8(m.Assignor), uint8(groupAssignorMax), "assignor")
	clientInfo := false
	for i := range m.Members {
		clientInfo = clientInfo || m.Members[i].hasClientInfo()
	}
	skipped := slices.ContainsFunc(m.Offsets, func(o GroupOffset) bool { return o.Skipped != 0 })
	var flags uint8
	if clientInfo {
		flags |= describeFlagClientInfo
	}
	if skipped {
		flags |= describeFlagSkippedOffsets
	}
	w.u8(flags)
	w.zero(1)
	w.u64(m.GroupEpoch)
	w.count(len(m.Members), "members")
	for i := range m.Members {
		m.Members[i].put(&w, clientInfo)
	}
	w.count(len(m.Offsets), "offsets")
	for i := range m.Offsets {
		m.Offsets[i].put(&w, skipped)
	}
	m.Policy.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *DescribeGroupReply) Decode(b []byte) error {
	r := newFieldReader(b, "describe-group reply")
	r.str16(&m.Group, MaxNameLen, "group")
	m.State = GroupState(r.enum(uint8(groupStateMax), "state"))
	m.Assignor = GroupAssignor(r.enum(uint8(groupAssignorMax), "assignor"))
	flags := r.enum(describeFlagClientInfo|describeFlagSkippedOffsets, "flags")
	clientInfo := flags&describeFlagClientInfo != 0
	skipped := flags&describeFlagSkippedOffsets != 0
	r.zero(1, "reserved")
	m.GroupEpoch = r.u64("group epoch")
	m.Members = resize(m.Members, r.count(groupMemberMinSize, "members"))
	seen := false
	for i := range m.Members {
		m.Members[i].get(&r, clientInfo)
		seen = seen || m.Members[i].hasClientInfo()
	}
	if clientInfo && !seen {
		r.fail("client-info flag set and no member has a client id or host")
	}
	m.Offsets = resize(m.Offsets, r.count(groupOffsetMinSize, "offsets"))
	anySkipped := false
	for i := range m.Offsets {
		m.Offsets[i].get(&r, skipped)
		anySkipped = anySkipped || m.Offsets[i].Skipped != 0
	}
	if skipped && !anySkipped {
		r.fail("skipped-offsets flag set and no offset has a skipped count")
	}
	m.Policy.get(&r)
	return r.finish()
}

// GroupSummary is one group of a listing.
//
//	group str16 | state u8 | assignor u8 | reserved(2) | group epoch u64 |
//	members u32 | topics list<str16>
type GroupSummary struct {
	Group      string
	State      GroupState
	Assignor   GroupAssignor
	GroupEpoch uint64
	Members    uint32
	Topics     []string
}

const groupSummaryMinSize = 2 + 1 + 1 + 2 + 8 + 4 + 4

// ListGroupsRequest lists the node's consumer groups.
//
//	(empty)
type ListGroupsRequest struct{}

// Kind implements Message.
func (*ListGroupsRequest) Kind() Kind { return KindListGroups }

// Encode implements Message.
func (m *ListGroupsRequest) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (m *ListGroupsRequest) Decode(b []byte) error {
	r := newFieldReader(b, "list-groups")
	return r.finish()
}

// ListGroupsReply lists groups by name.
//
//	groups list<GroupSummary>
type ListGroupsReply struct {
	Groups []GroupSummary
}

// Kind implements Message.
func (*ListGroupsReply) Kind() Kind { return KindListGroups }

// Encode implements Message.
func (m *ListGroupsReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "list-groups reply")
	w.count(len(m.Groups), "groups")
	for i := range m.Groups {
		g := &m.Groups[i]
		w.str16(g.Group, MaxNameLen, "group")
		w.enum(uint8(g.State), uint8(groupStateMax), "state")
		w.enum(uint8(g.Assignor), uint8(groupAssignorMax), "assignor")
		w.zero(2)
		w.u64(g.GroupEpoch)
		w.u32(g.Members)
		putNames(&w, g.Topics, "topics")
	}
	return w.result()
}

// Decode implements Message.
func (m *ListGroupsReply) Decode(b []byte) error {
	r := newFieldReader(b, "list-groups reply")
	m.Groups = resize(m.Groups, r.count(groupSummaryMinSize, "groups"))
	for i := range m.Groups {
		g := &m.Groups[i]
		r.str16(&g.Group, MaxNameLen, "group")
		g.State = GroupState(r.enum(uint8(groupStateMax), "state"))
		g.Assignor = GroupAssignor(r.enum(uint8(groupAssignorMax), "assignor"))
		r.zero(2, "reserved")
		g.GroupEpoch = r.u64("group epoch")
		g.Members = r.u32("members")
		g.Topics = getNames(&r, g.Topics, "topics")
	}
	return r.finish()
}

// DeleteGroupRequest deletes a consumer group: its committed offsets on
// every partition, its commit policy and its record. A group with members
// is refused with StatusInvalidArgument (its members must leave first),
// and so is a group the node does not know. Needs the admin scope.
//
//	group str16
type DeleteGroupRequest struct {
	Group string
}

// Kind implements Message.
func (*DeleteGroupRequest) Kind() Kind { return KindDeleteGroup }

// Encode implements Message.
func (m *DeleteGroupRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "delete-group")
	w.str16(m.Group, MaxNameLen, "group")
	return w.result()
}

// Decode implements Message.
func (m *DeleteGroupRequest) Decode(b []byte) error {
	r := newFieldReader(b, "delete-group")
	r.str16(&m.Group, MaxNameLen, "group")
	return r.finish()
}

// DeleteGroupReply is empty: the deletion is durable.
//
//	(empty)
type DeleteGroupReply struct{}

// Kind implements Message.
func (*DeleteGroupReply) Kind() Kind { return KindDeleteGroup }

// Encode implements Message.
func (*DeleteGroupReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*DeleteGroupReply) Decode(b []byte) error {
	r := newFieldReader(b, "delete-group reply")
	return r.finish()
}
