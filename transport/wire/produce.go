package wire

import "math"

// InitProducerRequest obtains a producer identity for idempotent,
// fenced produce. With a Name, the node keeps one producer id per name
// and bumps its epoch on every call, fencing the previous incarnation.
// Without a Name, a zero ProducerID asks for a fresh id; a non-zero
// ProducerID and ProducerEpoch ask to bump that producer's own epoch (to
// recover from StatusOutOfOrderSequence without a new id).
//
//	name str16 | producer id u64 | producer epoch u32
type InitProducerRequest struct {
	Name          string
	ProducerID    uint64
	ProducerEpoch uint32
}

// Kind implements Message.
func (*InitProducerRequest) Kind() Kind { return KindInitProducer }

// Encode implements Message.
func (m *InitProducerRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "init-producer")
	w.str16(m.Name, MaxNameLen, "producer name")
	w.u64(m.ProducerID)
	w.u32(m.ProducerEpoch)
	return w.result()
}

// Decode implements Message.
func (m *InitProducerRequest) Decode(b []byte) error {
	r := newFieldReader(b, "init-producer")
	r.str16(&m.Name, MaxNameLen, "producer name")
	m.ProducerID = r.u64("producer id")
	m.ProducerEpoch = r.u32("producer epoch")
	return r.finish()
}

// InitProducerReply is the producer's identity: batches carry it in their
// header, with a sequence number per partition starting at 0.
//
//	producer id u64 | producer epoch u32
type InitProducerReply struct {
	ProducerID    uint64
	ProducerEpoch uint32
}

// Kind implements Message.
func (*InitProducerReply) Kind() Kind { return KindInitProducer }

// Encode implements Message.
func (m *InitProducerReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "init-producer reply")
	w.u64(m.ProducerID)
	w.u32(m.ProducerEpoch)
	return w.result()
}

// Decode implements Message.
func (m *InitProducerReply) Decode(b []byte) error {
	r := newFieldReader(b, "init-producer reply")
	m.ProducerID = r.u64("producer id")
	m.ProducerEpoch = r.u32("producer epoch")
	return r.finish()
}

// ProduceRequest appends one record batch to a partition. The producer id,
// epoch and base sequence are inside the batch header; the node stores the
// batch bytes as they arrive (stamping only the base offset and, on an
// append-time topic, the timestamps).
//
//	topic str16 | topic id [16] (zero: any) | partition u32 | batch bytes32
//
// A non-zero TopicID makes the append fail with StatusTopicRecreated if
// the name now belongs to another creation of the topic.
type ProduceRequest struct {
	Topic     string
	TopicID   [16]byte
	Partition uint32
	// Batch is one encoded record batch. After Decode it aliases the
	// frame body, with no copy: whoever keeps it (storage takes ownership
	// of an appended batch) must not reuse the frame's buffer.
	Batch []byte
}

// Kind implements Message.
func (*ProduceRequest) Kind() Kind { return KindProduce }

// Encode implements Message.
func (m *ProduceRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "produce")
	w.str16(m.Topic, MaxNameLen, "topic")
	w.fixed(m.TopicID[:])
	w.u32(m.Partition)
	w.bytes32(m.Batch, math.MaxInt32, "batch")
	return w.result()
}

// Decode implements Message. It does not allocate when the topic name is
// the one m already holds.
func (m *ProduceRequest) Decode(b []byte) error {
	r := newFieldReader(b, "produce")
	r.str16(&m.Topic, MaxNameLen, "topic")
	copy(m.TopicID[:], r.fixed(16, "topic id"))
	m.Partition = r.u32("partition")
	m.Batch = r.bytes32(math.MaxInt32, "batch")
	return r.finish()
}

// NoAppendTime is ProduceReply.AppendTime on a topic that keeps producer
// timestamps.
const NoAppendTime int64 = -1

// ProduceReply carries the offsets assigned to the batch. It is sent once
// the batch is durable per the topic's policy.
//
//	base offset u64 | last offset u64 | append time i64 | flags u8 (bit 0: duplicate)
type ProduceReply struct {
	BaseOffset uint64
	LastOffset uint64
	// AppendTime is the timestamp (unix ms) the node stamped on an
	// append-time topic, or NoAppendTime.
	AppendTime int64
	// Duplicate says the batch was a retry of one already appended: the
	// offsets are the original ones and nothing was written again.
	Duplicate bool
}

// Kind implements Message.
func (*ProduceReply) Kind() Kind { return KindProduce }

const produceFlagDuplicate = 1 << 0

// Encode implements Message.
func (m *ProduceReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "produce reply")
	w.u64(m.BaseOffset)
	w.u64(m.LastOffset)
	w.i64(m.AppendTime)
	var flags uint8
	if m.Duplicate {
		flags |= produceFlagDuplicate
	}
	w.u8(flags)
	return w.result()
}

// Decode implements Message.
func (m *ProduceReply) Decode(b []byte) error {
	r := newFieldReader(b, "produce reply")
	m.BaseOffset = r.u64("base offset")
	m.LastOffset = r.u64("last offset")
	m.AppendTime = r.i64("append time")
	flags := r.u8("flags")
	if flags&^produceFlagDuplicate != 0 {
		r.fail("flags: unknown bits 0x%02x", flags&^produceFlagDuplicate)
	}
	m.Duplicate = flags&produceFlagDuplicate != 0
	return r.finish()
}
