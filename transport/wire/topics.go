package wire

import "slices"

// CreateTopicRequest creates a topic.
//
//	name str16 | config (52 bytes)
type CreateTopicRequest struct {
	Name   string
	Config TopicConfig
}

// Kind implements Message.
func (*CreateTopicRequest) Kind() Kind { return KindCreateTopic }

// Encode implements Message.
func (m *CreateTopicRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "create-topic")
	w.str16(m.Name, MaxNameLen, "topic")
	m.Config.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *CreateTopicRequest) Decode(b []byte) error {
	r := newFieldReader(b, "create-topic")
	r.str16(&m.Name, MaxNameLen, "topic")
	m.Config.get(&r)
	return r.finish()
}

// CreateTopicReply describes the created topic with its effective
// configuration and new topic id.
//
//	topic info
type CreateTopicReply struct {
	Topic TopicInfo
}

// Kind implements Message.
func (*CreateTopicReply) Kind() Kind { return KindCreateTopic }

// Encode implements Message.
func (m *CreateTopicReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "create-topic reply")
	m.Topic.put(&w)
	return w.result()
}

// Decode implements Message.
func (m *CreateTopicReply) Decode(b []byte) error {
	r := newFieldReader(b, "create-topic reply")
	m.Topic.get(&r)
	return r.finish()
}

// DeleteTopicRequest deletes a topic: its data, offsets, producer state and
// sessions. A non-zero TopicID deletes only that creation of the name
// (StatusTopicRecreated otherwise), so a retried delete never removes a
// topic re-created in between.
//
//	name str16 | topic id [16] (zero: any)
type DeleteTopicRequest struct {
	Name    string
	TopicID [16]byte
}

// Kind implements Message.
func (*DeleteTopicRequest) Kind() Kind { return KindDeleteTopic }

// Encode implements Message.
func (m *DeleteTopicRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "delete-topic")
	w.str16(m.Name, MaxNameLen, "topic")
	w.fixed(m.TopicID[:])
	return w.result()
}

// Decode implements Message.
func (m *DeleteTopicRequest) Decode(b []byte) error {
	r := newFieldReader(b, "delete-topic")
	r.str16(&m.Name, MaxNameLen, "topic")
	copy(m.TopicID[:], r.fixed(16, "topic id"))
	return r.finish()
}

// DeleteTopicReply is empty.
type DeleteTopicReply struct{}

// Kind implements Message.
func (*DeleteTopicReply) Kind() Kind { return KindDeleteTopic }

// Encode implements Message.
func (*DeleteTopicReply) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*DeleteTopicReply) Decode(b []byte) error {
	r := newFieldReader(b, "delete-topic reply")
	return r.finish()
}

// ListTopicsRequest is empty: it lists every topic the token may see.
type ListTopicsRequest struct{}

// Kind implements Message.
func (*ListTopicsRequest) Kind() Kind { return KindListTopics }

// Encode implements Message.
func (*ListTopicsRequest) Encode(dst []byte) ([]byte, error) { return dst, nil }

// Decode implements Message.
func (*ListTopicsRequest) Decode(b []byte) error {
	r := newFieldReader(b, "list-topics")
	return r.finish()
}

// ListTopicsReply lists topics by name.
//
//	count u32 | topic info × count
type ListTopicsReply struct {
	Topics []TopicInfo
}

// Kind implements Message.
func (*ListTopicsReply) Kind() Kind { return KindListTopics }

// Encode implements Message.
func (m *ListTopicsReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "list-topics reply")
	w.count(len(m.Topics), "topics")
	for i := range m.Topics {
		m.Topics[i].put(&w)
	}
	return w.result()
}

// Decode implements Message.
func (m *ListTopicsReply) Decode(b []byte) error {
	r := newFieldReader(b, "list-topics reply")
	m.Topics = resize(m.Topics, r.count(topicInfoMinSize, "topics"))
	for i := range m.Topics {
		m.Topics[i].get(&r)
	}
	return r.finish()
}

// DescribeTopicRequest asks for a topic's configuration and partitions.
//
//	name str16 | [flags u8: bit 0 skipped; absent when zero]
//
// The flags are an optional last field (docs/PROTOCOL.md §15): a request
// without them keeps its bytes, and a node that does not know them
// answers a request carrying them with StatusMalformedRequest.
type DescribeTopicRequest struct {
	Name string
	// WithSkipped asks the node for each partition's skipped offsets
	// (PartitionState.Skipped).
	WithSkipped bool
}

// describeFlagSkipped, in a describe request's flags, asks for skipped
// offsets: a client that sets it decodes the reply's skipped counts.
const describeFlagSkipped = 1

// Kind implements Message.
func (*DescribeTopicRequest) Kind() Kind { return KindDescribeTopic }

// Encode implements Message.
func (m *DescribeTopicRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "describe-topic")
	w.str16(m.Name, MaxNameLen, "topic")
	putDescribeFlags(&w, m.WithSkipped)
	return w.result()
}

// Decode implements Message.
func (m *DescribeTopicRequest) Decode(b []byte) error {
	r := newFieldReader(b, "describe-topic")
	r.str16(&m.Name, MaxNameLen, "topic")
	m.WithSkipped = getDescribeFlags(&r)
	return r.finish()
}

func putDescribeFlags(w *fieldWriter, skipped bool) {
	if skipped {
		w.u8(describeFlagSkipped)
	}
}

// getDescribeFlags reads a describe request's optional flags: absent, or
// a byte with known bits of which one is set.
func getDescribeFlags(r *fieldReader) bool {
	if r.err != nil || r.left() == 0 {
		return false
	}
	if r.enum(describeFlagSkipped, "flags") == 0 && r.err == nil {
		r.fail("flags present and zero")
	}
	return r.err == nil
}

// DescribeTopicReply is the topic and the state of every partition.
//
//	topic info | count u32 | partition state × count |
//	[skipped u64 × count: present exactly when a partition's is not zero]
//
// The skipped counts follow only when the request asked for them
// (DescribeTopicRequest.WithSkipped): a node leaves them zero otherwise,
// so a client that does not know them decodes the reply it always did.
type DescribeTopicReply struct {
	Topic TopicInfo
	// Partitions carry their Skipped counts (zero unless asked for).
	Partitions []PartitionState
}

// Kind implements Message.
func (*DescribeTopicReply) Kind() Kind { return KindDescribeTopic }

// Encode implements Message.
func (m *DescribeTopicReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "describe-topic reply")
	m.Topic.put(&w)
	putPartitionStates(&w, m.Partitions)
	if slices.ContainsFunc(m.Partitions, func(p PartitionState) bool { return p.Skipped != 0 }) {
		for i := range m.Partitions {
			w.u64(m.Partitions[i].Skipped)
		}
	}
	return w.result()
}

// Decode implements Message.
func (m *DescribeTopicReply) Decode(b []byte) error {
	r := newFieldReader(b, "describe-topic reply")
	m.Topic.get(&r)
	m.Partitions = getPartitionStates(&r, m.Partitions)
	if r.err == nil && r.left() > 0 {
		some := false
		for i := range m.Partitions {
			m.Partitions[i].Skipped = r.u64("skipped")
			some = some || m.Partitions[i].Skipped != 0
		}
		if r.err == nil && !some {
			r.fail("skipped counts present and all zero")
		}
	}
	return r.finish()
}

// PurgeRequest purges partitions of a topic: each one's start offset rises
// to its high watermark and its history epoch rises by one; offsets are
// never reused. An empty Partitions purges every partition.
//
//	topic str16 | topic id [16] (zero: any) | count u32 | partition u32 × count
type PurgeRequest struct {
	Topic      string
	TopicID    [16]byte
	Partitions []uint32
}

// Kind implements Message.
func (*PurgeRequest) Kind() Kind { return KindPurge }

// Encode implements Message.
func (m *PurgeRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "purge")
	w.str16(m.Topic, MaxNameLen, "topic")
	w.fixed(m.TopicID[:])
	putPartitionIndexes(&w, m.Partitions)
	return w.result()
}

// Decode implements Message.
func (m *PurgeRequest) Decode(b []byte) error {
	r := newFieldReader(b, "purge")
	r.str16(&m.Topic, MaxNameLen, "topic")
	copy(m.TopicID[:], r.fixed(16, "topic id"))
	m.Partitions = getPartitionIndexes(&r, m.Partitions)
	return r.finish()
}

// PurgeReply carries each purged partition's new state, with a status per
// partition. Purge is acknowledged only once it is durable.
//
//	count u32 | partition state × count
type PurgeReply struct {
	Partitions []PartitionState
}

// Kind implements Message.
func (*PurgeReply) Kind() Kind { return KindPurge }

// Encode implements Message.
func (m *PurgeReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "purge reply")
	putPartitionStates(&w, m.Partitions)
	return w.result()
}

// Decode implements Message.
func (m *PurgeReply) Decode(b []byte) error {
	r := newFieldReader(b, "purge reply")
	m.Partitions = getPartitionStates(&r, m.Partitions)
	return r.finish()
}

// GetPartitionStateRequest asks for the start offset, high watermark and
// history epoch of partitions of a topic (empty Partitions: all).
//
//	topic str16 | count u32 | partition u32 × count
type GetPartitionStateRequest struct {
	Topic      string
	Partitions []uint32
}

// Kind implements Message.
func (*GetPartitionStateRequest) Kind() Kind { return KindGetPartitionState }

// Encode implements Message.
func (m *GetPartitionStateRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "get-partition-state")
	w.str16(m.Topic, MaxNameLen, "topic")
	putPartitionIndexes(&w, m.Partitions)
	return w.result()
}

// Decode implements Message.
func (m *GetPartitionStateRequest) Decode(b []byte) error {
	r := newFieldReader(b, "get-partition-state")
	r.str16(&m.Topic, MaxNameLen, "topic")
	m.Partitions = getPartitionIndexes(&r, m.Partitions)
	return r.finish()
}

// GetPartitionStateReply carries the topic id and the partitions' states.
//
//	topic id [16] | count u32 | partition state × count
type GetPartitionStateReply struct {
	TopicID    [16]byte
	Partitions []PartitionState
}

// Kind implements Message.
func (*GetPartitionStateReply) Kind() Kind { return KindGetPartitionState }

// Encode implements Message.
func (m *GetPartitionStateReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "get-partition-state reply")
	w.fixed(m.TopicID[:])
	putPartitionStates(&w, m.Partitions)
	return w.result()
}

// Decode implements Message.
func (m *GetPartitionStateReply) Decode(b []byte) error {
	r := newFieldReader(b, "get-partition-state reply")
	copy(m.TopicID[:], r.fixed(16, "topic id"))
	m.Partitions = getPartitionStates(&r, m.Partitions)
	return r.finish()
}
