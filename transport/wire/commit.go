package wire

// CommitOffset commits one partition's position.
//
//	topic str16 | partition u32 | offset u64 | token bytes16
type CommitOffset struct {
	Topic     string
	Partition uint32
	// Offset is the position to resume from: one past the last record
	// consumed (a poll reply's Next, or anything the token delivered).
	Offset uint64
	// Token is the fence token of the poll the offset derives from, as
	// the reply gave it.
	Token []byte
}

const commitOffsetMinSize = 2 + 4 + 8 + 2

// CommitRequest commits positions for a consumer. Each commit is fenced by
// its token: one from an older history, session or assignment is refused
// even when its offset is numerically valid now, and a committed offset
// never moves backwards (use ResetPosition).
//
//	consumer | count u32 | commit offset × count
type CommitRequest struct {
	Consumer Consumer
	Offsets  []CommitOffset
}

// Kind implements Message.
func (*CommitRequest) Kind() Kind { return KindCommit }

// Encode implements Message.
func (m *CommitRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "commit")
	m.Consumer.put(&w)
	w.count(len(m.Offsets), "offsets")
	for i := range m.Offsets {
		o := &m.Offsets[i]
		w.str16(o.Topic, MaxNameLen, "topic")
		w.u32(o.Partition)
		w.u64(o.Offset)
		w.bytes16(o.Token, MaxFenceTokenLen, "token")
	}
	return w.result()
}

// Decode implements Message. Tokens alias b.
func (m *CommitRequest) Decode(b []byte) error {
	r := newFieldReader(b, "commit")
	m.Consumer.get(&r)
	m.Offsets = resize(m.Offsets, r.count(commitOffsetMinSize, "offsets"))
	for i := range m.Offsets {
		o := &m.Offsets[i]
		r.str16(&o.Topic, MaxNameLen, "topic")
		o.Partition = r.u32("partition")
		o.Offset = r.u64("offset")
		o.Token = r.bytes16(MaxFenceTokenLen, "token")
	}
	return r.finish()
}

// OffsetResult is one partition's outcome of a commit or a reset.
//
//	status u16 | message str16 | offset u64
type OffsetResult struct {
	Status  Status
	Message string
	// Offset is the consumer's committed position after the request
	// (also when it was refused, if the node knows it).
	Offset uint64
}

const offsetResultMinSize = 2 + 2 + 8

func putOffsetResults(w *fieldWriter, rs []OffsetResult) {
	w.count(len(rs), "partitions")
	for i := range rs {
		w.u16(uint16(rs[i].Status))
		w.text(rs[i].Message)
		w.u64(rs[i].Offset)
	}
}

func getOffsetResults(r *fieldReader, rs []OffsetResult) []OffsetResult {
	rs = resize(rs, r.count(offsetResultMinSize, "partitions"))
	for i := range rs {
		rs[i].Status = Status(r.u16("status"))
		r.str16(&rs[i].Message, MaxTextLen, "message")
		rs[i].Offset = r.u64("offset")
	}
	return rs
}

// CommitReply has one result per committed offset, in request order.
//
//	count u32 | offset result × count
type CommitReply struct {
	Partitions []OffsetResult
}

// Kind implements Message.
func (*CommitReply) Kind() Kind { return KindCommit }

// Encode implements Message.
func (m *CommitReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "commit reply")
	putOffsetResults(&w, m.Partitions)
	return w.result()
}

// Decode implements Message.
func (m *CommitReply) Decode(b []byte) error {
	r := newFieldReader(b, "commit reply")
	m.Partitions = getOffsetResults(&r, m.Partitions)
	return r.finish()
}

// ResetPartition moves a consumer's committed position on one partition.
//
//	topic str16 | partition u32 | position (10 bytes) | token bytes16
type ResetPartition struct {
	Topic     string
	Partition uint32
	// Position is resolved on the node (PositionNext is not allowed) and
	// committed, backwards if need be.
	Position Position
	// Token is a fence token of the consumer on this partition: from a
	// poll, or from GetCommitted.
	Token []byte
}

const resetPartitionMinSize = 2 + 4 + positionSize + 2

// ResetPositionRequest seeks and commits in one fenced step: the explicit
// way to move a committed position backwards.
//
//	consumer | count u32 | reset partition × count
type ResetPositionRequest struct {
	Consumer   Consumer
	Partitions []ResetPartition
}

// Kind implements Message.
func (*ResetPositionRequest) Kind() Kind { return KindResetPosition }

// Encode implements Message.
func (m *ResetPositionRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "reset-position")
	m.Consumer.put(&w)
	w.count(len(m.Partitions), "partitions")
	for i := range m.Partitions {
		p := &m.Partitions[i]
		w.str16(p.Topic, MaxNameLen, "topic")
		w.u32(p.Partition)
		p.Position.put(&w)
		w.bytes16(p.Token, MaxFenceTokenLen, "token")
	}
	return w.result()
}

// Decode implements Message. Tokens alias b.
func (m *ResetPositionRequest) Decode(b []byte) error {
	r := newFieldReader(b, "reset-position")
	m.Consumer.get(&r)
	m.Partitions = resize(m.Partitions, r.count(resetPartitionMinSize, "partitions"))
	for i := range m.Partitions {
		p := &m.Partitions[i]
		r.str16(&p.Topic, MaxNameLen, "topic")
		p.Partition = r.u32("partition")
		p.Position.get(&r)
		p.Token = r.bytes16(MaxFenceTokenLen, "token")
	}
	return r.finish()
}

// ResetPositionReply has one result per partition, in request order; its
// Offset is the resolved, committed position.
//
//	count u32 | offset result × count
type ResetPositionReply struct {
	Partitions []OffsetResult
}

// Kind implements Message.
func (*ResetPositionReply) Kind() Kind { return KindResetPosition }

// Encode implements Message.
func (m *ResetPositionReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "reset-position reply")
	putOffsetResults(&w, m.Partitions)
	return w.result()
}

// Decode implements Message.
func (m *ResetPositionReply) Decode(b []byte) error {
	r := newFieldReader(b, "reset-position reply")
	m.Partitions = getOffsetResults(&r, m.Partitions)
	return r.finish()
}

// TopicPartition names one partition of a topic.
//
//	topic str16 | partition u32
type TopicPartition struct {
	Topic     string
	Partition uint32
}

// GetCommittedRequest reads a consumer's committed positions.
//
//	consumer | count u32 | topic partition × count
type GetCommittedRequest struct {
	Consumer   Consumer
	Partitions []TopicPartition
}

// Kind implements Message.
func (*GetCommittedRequest) Kind() Kind { return KindGetCommitted }

// Encode implements Message.
func (m *GetCommittedRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "get-committed")
	m.Consumer.put(&w)
	w.count(len(m.Partitions), "partitions")
	for i := range m.Partitions {
		w.str16(m.Partitions[i].Topic, MaxNameLen, "topic")
		w.u32(m.Partitions[i].Partition)
	}
	return w.result()
}

// Decode implements Message.
func (m *GetCommittedRequest) Decode(b []byte) error {
	r := newFieldReader(b, "get-committed")
	m.Consumer.get(&r)
	m.Partitions = resize(m.Partitions, r.count(2+4, "partitions"))
	for i := range m.Partitions {
		r.str16(&m.Partitions[i].Topic, MaxNameLen, "topic")
		m.Partitions[i].Partition = r.u32("partition")
	}
	return r.finish()
}

// Committed is one partition's committed position.
//
//	status u16 | message str16 | has offset u8 (0|1) | offset u64 | history u64 | token bytes16
type Committed struct {
	Status  Status
	Message string
	// HasOffset is false when the consumer never committed on the
	// partition; Offset is then zero.
	HasOffset bool
	Offset    uint64
	// History is the history epoch the offset was committed in. An offset
	// of an older epoch than the partition's resumes at the start offset.
	History uint64
	// Token is a fence token for the consumer on the partition in its
	// current world, usable by ResetPosition. After Decode it aliases the
	// frame body.
	Token []byte
}

const committedMinSize = 2 + 2 + 1 + 8 + 8 + 2

// GetCommittedReply has one entry per requested partition, in request
// order.
//
//	count u32 | committed × count
type GetCommittedReply struct {
	Partitions []Committed
}

// Kind implements Message.
func (*GetCommittedReply) Kind() Kind { return KindGetCommitted }

// Encode implements Message.
func (m *GetCommittedReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "get-committed reply")
	w.count(len(m.Partitions), "partitions")
	for i := range m.Partitions {
		c := &m.Partitions[i]
		w.u16(uint16(c.Status))
		w.text(c.Message)
		w.bool8(c.HasOffset)
		if !c.HasOffset && c.Offset != 0 {
			w.fail(StatusInvalidArgument, "offset %d without HasOffset", c.Offset)
		}
		w.u64(c.Offset)
		w.u64(c.History)
		w.bytes16(c.Token, MaxFenceTokenLen, "token")
	}
	return w.result()
}

// Decode implements Message.
func (m *GetCommittedReply) Decode(b []byte) error {
	r := newFieldReader(b, "get-committed reply")
	m.Partitions = resize(m.Partitions, r.count(committedMinSize, "partitions"))
	for i := range m.Partitions {
		c := &m.Partitions[i]
		c.Status = Status(r.u16("status"))
		r.str16(&c.Message, MaxTextLen, "message")
		c.HasOffset = r.bool8("has offset")
		c.Offset = r.u64("offset")
		if !c.HasOffset && c.Offset != 0 {
			r.fail("offset %d without has-offset", c.Offset)
		}
		c.History = r.u64("history")
		c.Token = r.bytes16(MaxFenceTokenLen, "token")
	}
	return r.finish()
}
