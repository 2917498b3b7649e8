package wire

import "strconv"

// ConsumerKind says who consumes.
type ConsumerKind uint8

// Consumer kinds.
const (
	// ConsumerAnonymous reads by position and keeps no progress on the
	// node: it cannot commit or use PositionNext.
	ConsumerAnonymous ConsumerKind = 0
	// ConsumerNamed is a named individual consumer in a session (see
	// AttachConsumerRequest).
	ConsumerNamed ConsumerKind = 1
	// ConsumerMember is a member of a consumer group. Reserved: version 1
	// nodes answer it with StatusInvalidArgument.
	ConsumerMember  ConsumerKind = 2
	consumerKindMax              = ConsumerMember
)

// String returns the kind's name.
func (k ConsumerKind) String() string {
	switch k {
	case ConsumerAnonymous:
		return "anonymous"
	case ConsumerNamed:
		return "named"
	case ConsumerMember:
		return "member"
	}
	return "consumer(" + strconv.Itoa(int(k)) + ")"
}

// Consumer identifies on whose behalf a poll, commit, reset or offset
// lookup runs. Every field is always encoded; the node ignores the ones
// the kind does not use.
//
//	kind u8 | name str16 | session epoch u64 | member id str16 | member epoch u64
type Consumer struct {
	Kind ConsumerKind
	// Name is the consumer's name (ConsumerNamed) or the group's name
	// (ConsumerMember).
	Name string
	// Session is the session epoch AttachConsumer handed out under Name
	// (node-wide; ConsumerNamed).
	Session uint64
	// MemberID and MemberEpoch identify a group member (ConsumerMember).
	MemberID    string
	MemberEpoch uint64
}

func (c *Consumer) put(w *fieldWriter) {
	w.enum(uint8(c.Kind), uint8(consumerKindMax), "consumer kind")
	w.str16(c.Name, MaxNameLen, "consumer name")
	w.u64(c.Session)
	w.str16(c.MemberID, MaxNameLen, "member id")
	w.u64(c.MemberEpoch)
}

func (c *Consumer) get(r *fieldReader) {
	c.Kind = ConsumerKind(r.enum(uint8(consumerKindMax), "consumer kind"))
	r.str16(&c.Name, MaxNameLen, "consumer name")
	c.Session = r.u64("session epoch")
	r.str16(&c.MemberID, MaxNameLen, "member id")
	c.MemberEpoch = r.u64("member epoch")
}

// PositionMode says how a position is given.
type PositionMode uint8

// Position modes.
const (
	// PositionOffset: at Position.Offset.
	PositionOffset PositionMode = 1
	// PositionTimestamp: at the first record whose timestamp is at least
	// Position.Timestamp (unix ms), by the partition's monotone time index.
	PositionTimestamp PositionMode = 2
	// PositionFirst: at the log start offset.
	PositionFirst PositionMode = 3
	// PositionLast: at the last record in the log (high watermark − 1),
	// or at the high watermark when the log is empty.
	PositionLast PositionMode = 4
	// PositionEnd: at the high watermark: only records appended later.
	PositionEnd PositionMode = 5
	// PositionNext: at the consumer's committed position. A bookmark of an
	// older history epoch resumes at the new start offset.
	PositionNext    PositionMode = 6
	positionModeMax              = PositionNext
)

// String returns the mode's name.
func (m PositionMode) String() string {
	switch m {
	case 0:
		return "none"
	case PositionOffset:
		return "offset"
	case PositionTimestamp:
		return "timestamp"
	case PositionFirst:
		return "first"
	case PositionLast:
		return "last"
	case PositionEnd:
		return "end"
	case PositionNext:
		return "next"
	}
	return "position(" + strconv.Itoa(int(m)) + ")"
}

// Position is where a poll starts or a reset moves a consumer.
//
//	mode u8 | reset u8 | value u64 (offset, or timestamp as i64; zero for other modes)
type Position struct {
	Mode      PositionMode
	Offset    uint64 // PositionOffset only
	Timestamp int64  // PositionTimestamp only
	// Reset is where to go when the position is outside [start offset,
	// high watermark] (retention moved the start past it) or when
	// PositionNext finds no committed offset: PositionFirst, PositionEnd,
	// or 0 to fail with StatusOffsetOutOfRange.
	Reset PositionMode
}

const positionSize = 10

func (p *Position) put(w *fieldWriter) {
	if p.Mode == 0 || p.Mode > positionModeMax {
		w.fail(StatusInvalidArgument, "position mode %d", p.Mode)
	}
	if p.Reset != 0 && p.Reset != PositionFirst && p.Reset != PositionEnd {
		w.fail(StatusInvalidArgument, "position reset %s: want first, end or none", p.Reset)
	}
	w.u8(uint8(p.Mode))
	w.u8(uint8(p.Reset))
	switch {
	case p.Mode == PositionOffset && p.Timestamp == 0:
		w.u64(p.Offset)
	case p.Mode == PositionTimestamp && p.Offset == 0:
		w.i64(p.Timestamp)
	case p.Offset == 0 && p.Timestamp == 0:
		w.u64(0)
	default:
		w.fail(StatusInvalidArgument, "position %s carries a value it does not use", p.Mode)
		w.u64(0)
	}
}

func (p *Position) get(r *fieldReader) {
	*p = Position{}
	mode := PositionMode(r.u8("position mode"))
	reset := PositionMode(r.u8("position reset"))
	v := r.u64("position value")
	switch {
	case r.err != nil:
		return
	case mode == 0 || mode > positionModeMax:
		r.fail("position mode %d", mode)
	case reset != 0 && reset != PositionFirst && reset != PositionEnd:
		r.fail("position reset %d", reset)
	case mode == PositionOffset:
		p.Offset = v
	case mode == PositionTimestamp:
		p.Timestamp = int64(v)
	case v != 0:
		r.fail("position %s carries a value", mode)
	}
	p.Mode, p.Reset = mode, reset
}

// AttachConsumerRequest starts a session for a named consumer. The node
// hands out a new, higher session epoch on every attach; polls, commits
// and resets carrying an older one are refused with StatusFencedSession,
// so a second process attaching under the same name fences the first.
// Sessions are per name, node-wide: a named consumer is one process,
// whatever topics it reads. Topic is optional; when set it is checked
// against the token's scope and its id is returned.
//
//	topic str16 | name str16
type AttachConsumerRequest struct {
	Topic string
	Name  string
}

// Kind implements Message.
func (*AttachConsumerRequest) Kind() Kind { return KindAttachConsumer }

// Encode implements Message.
func (m *AttachConsumerRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "attach-consumer")
	w.str16(m.Topic, MaxNameLen, "topic")
	w.str16(m.Name, MaxNameLen, "consumer name")
	return w.result()
}

// Decode implements Message.
func (m *AttachConsumerRequest) Decode(b []byte) error {
	r := newFieldReader(b, "attach-consumer")
	r.str16(&m.Topic, MaxNameLen, "topic")
	r.str16(&m.Name, MaxNameLen, "consumer name")
	return r.finish()
}

// AttachConsumerReply carries the session epoch to put in Consumer.Session
// and the topic's id.
//
//	topic id [16] | session epoch u64
type AttachConsumerReply struct {
	TopicID [16]byte
	Session uint64
}

// Kind implements Message.
func (*AttachConsumerReply) Kind() Kind { return KindAttachConsumer }

// Encode implements Message.
func (m *AttachConsumerReply) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "attach-consumer reply")
	w.fixed(m.TopicID[:])
	w.u64(m.Session)
	return w.result()
}

// Decode implements Message.
func (m *AttachConsumerReply) Decode(b []byte) error {
	r := newFieldReader(b, "attach-consumer reply")
	copy(m.TopicID[:], r.fixed(16, "topic id"))
	m.Session = r.u64("session epoch")
	return r.finish()
}
