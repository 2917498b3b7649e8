package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/ledgemq/ledge/record"
)

// AutoCommit says whether a poll commits progress on its own.
type AutoCommit uint8

// Automatic commit modes. Only a named consumer or a group member can
// commit.
const (
	// AutoCommitNone: progress moves only by Commit or ResetPosition.
	AutoCommitNone AutoCommit = 0
	// AutoCommitOnDelivery (at most once): what a poll returns counts as
	// consumed; the commit is applied, fenced, when the poll completes.
	AutoCommitOnDelivery AutoCommit = 1
	// AutoCommitOnNextPoll (at least once): a poll commits what the
	// previous poll of the same consumer delivered, fenced by that poll's
	// token.
	AutoCommitOnNextPoll AutoCommit = 2
	autoCommitMax                   = AutoCommitOnNextPoll
)

// String returns the mode's name.
func (a AutoCommit) String() string {
	switch a {
	case AutoCommitNone:
		return "none"
	case AutoCommitOnDelivery:
		return "on-delivery"
	case AutoCommitOnNextPoll:
		return "on-next-poll"
	}
	return "autocommit(" + strconv.Itoa(int(a)) + ")"
}

// FilterParam is one key=value parameter of a filter.
type FilterParam struct {
	Key   string
	Value string
}

// Filter names a filter plugin to run on the node over the poll's result,
// with its parameters. Reserved for plugins: a version 1 node without
// plugins answers a poll naming a filter with StatusInvalidArgument.
//
//	name str16 (empty: no filter) | count u32 | (key str16 | value str16) × count
type Filter struct {
	Name   string
	Params []FilterParam
}

func (f *Filter) put(w *fieldWriter) {
	w.str16(f.Name, MaxNameLen, "filter name")
	if len(f.Params) > MaxFilterParams {
		w.fail(StatusInvalidArgument, "%d filter parameters exceed the limit of %d", len(f.Params), MaxFilterParams)
	}
	w.count(len(f.Params), "filter parameters")
	for i := range f.Params {
		w.str16(f.Params[i].Key, MaxNameLen, "parameter key")
		w.str16(f.Params[i].Value, MaxParamValueLen, "parameter value")
	}
}

func (f *Filter) get(r *fieldReader) {
	r.str16(&f.Name, MaxNameLen, "filter name")
	n := r.count(4, "filter parameters")
	if n > MaxFilterParams {
		r.fail("%d filter parameters exceed the limit of %d", n, MaxFilterParams)
		n = 0
	}
	f.Params = resize(f.Params, n)
	for i := range f.Params {
		r.str16(&f.Params[i].Key, MaxNameLen, "parameter key")
		r.str16(&f.Params[i].Value, MaxParamValueLen, "parameter value")
	}
}

// KeyMode says which records of a poll's partitions a PollKey keeps.
type KeyMode uint8

// Key modes.
const (
	// KeyAny: every record (no key field on the wire).
	KeyAny KeyMode = 0
	// KeyExact: the records whose key is the poll's key.
	KeyExact KeyMode = 1
	// KeyPrefix: the records whose key starts with the poll's key.
	KeyPrefix  KeyMode = 2
	keyModeMax         = KeyPrefix
)

// String returns the mode's name.
func (k KeyMode) String() string {
	switch k {
	case KeyAny:
		return "any"
	case KeyExact:
		return "exact"
	case KeyPrefix:
		return "prefix"
	}
	return "keymode(" + strconv.Itoa(int(k)) + ")"
}

// PollKey names the records a poll wants by key: the commands of one
// device. The node parks such a poll by its key and wakes it only for a
// record it matches; its reply carries node-built batches of the matching
// records (PayloadFiltered) and a next past every record it covered. A
// record with a null key matches no key.
//
//	mode u8 (1 exact, 2 prefix) | key bytes16 (1 to MaxPollKeyLen bytes)
//
// It is the optional last field of a poll request: absent (no bytes at
// all) when Mode is KeyAny, so a poll without a key is the same bytes for
// every node.
type PollKey struct {
	Mode KeyMode
	Key  []byte
}

func (k *PollKey) put(w *fieldWriter) {
	if k.Mode == KeyAny {
		if len(k.Key) > 0 {
			w.fail(StatusInvalidArgument, "a poll key needs a mode")
		}
		return
	}
	w.enum(uint8(k.Mode), uint8(keyModeMax), "key mode")
	if len(k.Key) == 0 {
		w.fail(StatusInvalidArgument, "a poll key of mode %s needs a key", k.Mode)
	}
	w.bytes16(k.Key, MaxPollKeyLen, "poll key")
}

// get reads the key, if the body has one left; the key is copied into
// the request's own buffer, so a reused request does not allocate.
func (k *PollKey) get(r *fieldReader) {
	k.Mode, k.Key = KeyAny, k.Key[:0]
	if r.err != nil || r.left() == 0 {
		return
	}
	k.Mode = KeyMode(r.enum(uint8(keyModeMax), "key mode"))
	if k.Mode == KeyAny {
		r.fail("key mode %s in a key field", k.Mode)
		return
	}
	b := r.bytes16(MaxPollKeyLen, "poll key")
	if r.err == nil && len(b) == 0 {
		r.fail("a poll key of mode %s needs a key", k.Mode)
	}
	k.Key = append(k.Key, b...)
}

// PollPartition is one partition a poll reads.
//
//	topic str16 | topic id [16] (zero: any) | partition u32 | position (10 bytes) | max bytes u32
type PollPartition struct {
	Topic     string
	TopicID   [16]byte
	Partition uint32
	Position  Position
	// MaxBytes bounds this partition's share of the reply (0: only the
	// poll's MaxBytes applies).
	MaxBytes uint32
}

const pollPartitionMinSize = 2 + 16 + 4 + positionSize + 4

// PollRequest reads one or several partitions. It is a long poll when
// MaxWait is positive: the node parks it until at least one partition has
// records to return, MaxWait passes (an OK reply with no records), or the
// world of a partition changes (a fence status for that partition). A
// poll may return less than MaxBytes; it returns at least one whole batch
// when one is available, even past MaxBytes, so a large batch never stalls
// a consumer.
//
//	consumer | max wait u64 ns | max messages u32 | max bytes u32 |
//	auto commit u8 | filter | count u32 | poll partition × count |
//	[poll key]
type PollRequest struct {
	Consumer Consumer
	MaxWait  time.Duration
	// MaxMessages and MaxBytes bound the whole reply (MaxMessages 0: no
	// count limit; MaxBytes 0: the node's default). Whole stored batches
	// are returned: the first batch is always served, a later one only
	// while the reply stays within both limits.
	MaxMessages uint32
	MaxBytes    uint32
	AutoCommit  AutoCommit
	Filter      Filter
	Partitions  []PollPartition
	// Key, when its mode is not KeyAny, keeps only the records of a key
	// or key prefix, on every partition of the poll (see PollKey).
	Key PollKey
}

// Kind implements Message.
func (*PollRequest) Kind() Kind { return KindPoll }

// Encode implements Message.
func (m *PollRequest) Encode(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, "poll")
	m.Consumer.put(&w)
	w.duration(m.MaxWait, "max wait")
	w.u32(m.MaxMessages)
	w.u32(m.MaxBytes)
	w.enum(uint8(m.AutoCommit), uint8(autoCommitMax), "auto commit")
	m.Filter.put(&w)
	w.count(len(m.Partitions), "partitions")
	for i := range m.Partitions {
		p := &m.Partitions[i]
		w.str16(p.Topic, MaxNameLen, "topic")
		w.fixed(p.TopicID[:])
		w.u32(p.Partition)
		p.Position.put(&w)
		w.u32(p.MaxBytes)
	}
	m.Key.put(&w)
	return w.result()
}

// Decode implements Message. Decoding the same consumer, filter and topic
// names into a reused request does not allocate.
func (m *PollRequest) Decode(b []byte) error {
	r := newFieldReader(b, "poll")
	m.Consumer.get(&r)
	m.MaxWait = r.duration("max wait")
	m.MaxMessages = r.u32("max messages")
	m.MaxBytes = r.u32("max bytes")
	m.AutoCommit = AutoCommit(r.enum(uint8(autoCommitMax), "auto commit"))
	m.Filter.get(&r)
	m.Partitions = resize(m.Partitions, r.count(pollPartitionMinSize, "partitions"))
	for i := range m.Partitions {
		p := &m.Partitions[i]
		r.str16(&p.Topic, MaxNameLen, "topic")
		copy(p.TopicID[:], r.fixed(16, "topic id"))
		p.Partition = r.u32("partition")
		p.Position.get(&r)
		p.MaxBytes = r.u32("max bytes")
	}
	m.Key.get(&r)
	return r.finish()
}

// PayloadKind says what a poll reply's batch bytes are.
type PayloadKind uint8

// Payload kinds.
const (
	// PayloadStored: whole record batches exactly as stored, back to back
	// (the producer's bytes with the base offset stamped).
	PayloadStored PayloadKind = 0
	// PayloadFiltered: record batches the node built from the records a
	// filter kept. Reserved: version 1 nodes without plugins never send
	// it. See PROTOCOL.md, "Node-built filtered batches".
	PayloadFiltered PayloadKind = 1
	payloadKindMax              = PayloadFiltered
)

// String returns the kind's name.
func (k PayloadKind) String() string {
	switch k {
	case PayloadStored:
		return "stored"
	case PayloadFiltered:
		return "filtered"
	}
	return "payload(" + strconv.Itoa(int(k)) + ")"
}

// PollPartitionReply is one partition's part of a poll reply.
//
//	status u16 | message str16 | topic id [16] | history u64 | start offset u64 |
//	high watermark u64 | next u64 | token bytes16 | payload kind u8 | batches bytes32
type PollPartitionReply struct {
	// Status is StatusOK or why this partition returned nothing (a fence
	// status, StatusOffsetOutOfRange, StatusUnknownPartition, ...). The
	// state fields below are filled whenever the node knows them.
	Status  Status
	Message string
	TopicID [16]byte
	// History, StartOffset and HighWatermark describe the partition when
	// the poll completed.
	History       uint64
	StartOffset   uint64
	HighWatermark uint64
	// Next is the position to poll from next: one past the last record
	// the poll covered, including records a filter dropped.
	Next uint64
	// Token is the fence token of this poll: opaque bytes (at most
	// MaxFenceTokenLen) that a commit or reset derived from this poll
	// hands back unchanged. After Decode it aliases the frame body; copy it
	// to keep it past the frame's buffer.
	Token   []byte
	Payload PayloadKind
	// Batches are the record batches, back to back. After Decode it
	// aliases the frame body. Encode writes Batches and then every element
	// of BatchParts as one byte string.
	Batches []byte
	// BatchParts lets a node encode whole stored batches from its read
	// result without first joining them. Decode leaves it empty.
	BatchParts [][]byte
}

const pollPartitionReplyMinSize = 2 + 2 + 16 + 4*8 + 2 + 1 + 4

// PollReply has one entry per partition of the request, in request order.
//
//	count u32 | poll partition reply × count
type PollReply struct {
	Partitions []PollPartitionReply
}

// Kind implements Message.
func (*PollReply) Kind() Kind { return KindPoll }

// SizeHint returns about how many bytes Encode appends, so that a caller
// can size the frame buffer once instead of growing it batch by batch.
func (m *PollReply) SizeHint() int {
	n := 8
	for i := range m.Partitions {
		p := &m.Partitions[i]
		n += 96 + len(p.Token) + len(p.Batches)
		for _, b := range p.BatchParts {
			n += len(b)
		}
	}
	return n
}

// Encode implements Message. It copies the batches into dst; with dst of
// enough capacity it does not allocate.
func (m *PollReply) Encode(dst []byte) ([]byte, error) {
	return m.encode(dst, nil)
}

// AppendFrameParts appends m as the reply frame to request id, like
// AppendReply, except that the elements of BatchParts are not copied: the
// frame is appended to parts as parts — pieces of the returned buffer and
// the BatchParts themselves — which, written back to back, are the bytes
// AppendReply would append. A node writes stored batches to the network
// without joining them first. With dst and parts of enough capacity (a
// node reuses them from one reply to the next) it allocates nothing for a
// reply of up to 16 batch parts.
func (m *PollReply) AppendFrameParts(dst []byte, parts [][]byte, id uint32) (buf []byte, out [][]byte, err error) {
	dst, start := StartFrame(dst, FrameHeader{Version: ProtocolVersion, Flags: FlagReply, Kind: KindPoll, ID: id})
	dst = append(dst, 0, 0, 0, 0) // StatusOK, empty message
	type cut struct {
		at   int
		part []byte
	}
	var few [16]cut
	cuts := few[:0]
	external := 0
	b, err := m.encode(dst, func(at int, part []byte) {
		cuts = append(cuts, cut{at, part})
		external += len(part)
	})
	if err != nil {
		return dst[:start], parts, err
	}
	n := len(b) - start - 4 + external
	if n < headerAfterLength || uint64(n) > math.MaxUint32 {
		return dst[:start], parts, errorf(StatusMessageTooLarge, fmt.Sprintf("frame of %d bytes", n))
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(n))
	parts = slices.Grow(parts, 2*len(cuts)+1)
	from := start
	for _, c := range cuts {
		if c.at > from {
			parts = append(parts, b[from:c.at:c.at])
			from = c.at
		}
		if len(c.part) > 0 {
			parts = append(parts, c.part)
		}
	}
	if from < len(b) {
		parts = append(parts, b[from:])
	}
	return b, parts, nil
}

// encode appends the body; with external set, the elements of BatchParts
// are handed to it with the length of the encoding at their place instead
// of being copied.
func (m *PollReply) encode(dst []byte, external func(at int, part []byte)) ([]byte, error) {
	w := newFieldWriter(dst, "poll reply")
	w.count(len(m.Partitions), "partitions")
	for i := range m.Partitions {
		p := &m.Partitions[i]
		w.u16(uint16(p.Status))
		w.text(p.Message)
		w.fixed(p.TopicID[:])
		w.u64(p.History)
		w.u64(p.StartOffset)
		w.u64(p.HighWatermark)
		w.u64(p.Next)
		w.bytes16(p.Token, MaxFenceTokenLen, "token")
		w.enum(uint8(p.Payload), uint8(payloadKindMax), "payload kind")
		n := len(p.Batches)
		for _, part := range p.BatchParts {
			n += len(part)
		}
		if n > math.MaxInt32 {
			w.fail(StatusMessageTooLarge, "batches: %d bytes", n)
		}
		w.u32(uint32(n))
		w.fixed(p.Batches)
		for _, part := range p.BatchParts {
			if external != nil {
				external(len(w.b), part)
			} else {
				w.fixed(part)
			}
		}
	}
	return w.result()
}

// Decode implements Message. Into a reused reply it does not allocate.
func (m *PollReply) Decode(b []byte) error {
	r := newFieldReader(b, "poll reply")
	m.Partitions = resize(m.Partitions, r.count(pollPartitionReplyMinSize, "partitions"))
	for i := range m.Partitions {
		p := &m.Partitions[i]
		readPollPartitionFields(&r, p)
		p.Batches = r.bytes32(math.MaxInt32, "batches")
		p.BatchParts = p.BatchParts[:0]
	}
	return r.finish()
}

// readPollPartitionFields reads a poll partition reply's fields before
// its batches.
func readPollPartitionFields(r *fieldReader, p *PollPartitionReply) {
	p.Status = Status(r.u16("status"))
	r.str16(&p.Message, MaxTextLen, "message")
	copy(p.TopicID[:], r.fixed(16, "topic id"))
	p.History = r.u64("history")
	p.StartOffset = r.u64("start offset")
	p.HighWatermark = r.u64("high watermark")
	p.Next = r.u64("next")
	p.Token = r.bytes16(MaxFenceTokenLen, "token")
	p.Payload = PayloadKind(r.enum(uint8(payloadKindMax), "payload kind"))
}

// NextBatch splits the first record batch off b, a poll reply's Batches,
// by the length in its header; it does not verify the batch (see
// record.VerifyBatch and record.RecordIterator). It fails with record.ErrCorruptBatch when b
// does not start with a whole batch header and body.
func NextBatch(b []byte) (batch, rest []byte, err error) {
	h, err := record.ParseBatchHeader(b)
	if err != nil {
		return nil, b, err
	}
	if uint64(h.Length) > uint64(len(b)) {
		return nil, b, fmt.Errorf("%w: batch of %d bytes, %d left", record.ErrCorruptBatch, h.Length, len(b))
	}
	return b[:h.Length:h.Length], b[h.Length:], nil
}

// PollReplyHead is what the start of a successful poll reply frame says
// before the batches of its first partition: how many partitions it
// answers, and the first one's fields. A consumer that reads one
// partition learns from it where its next poll starts while the rest of a
// large reply is still on its way.
type PollReplyHead struct {
	ID         uint32 // the request the frame answers
	Partitions int
	// First is the first partition's reply without its batches; its Token
	// aliases the frame. BatchesLen is the length of its batches.
	First      PollPartitionReply
	BatchesLen int
}

// ParsePollReplyHead parses the start of a poll reply frame (header
// included), which may be cut anywhere after the first partition's
// batches length. It reports false for anything else: a frame cut
// earlier, another kind, a reply with an error status, a malformed field.
// A head it accepts says nothing about the rest of the frame, which the
// whole frame's decoding still checks.
func ParsePollReplyHead(b []byte) (PollReplyHead, bool) {
	var hd PollReplyHead
	if len(b) < FrameHeaderSize {
		return hd, false
	}
	h, _, err := ParseFrameHeader(b, math.MaxInt)
	if err != nil || !h.IsReply() || h.Kind != KindPoll || h.Version != ProtocolVersion {
		return hd, false
	}
	hd.ID = h.ID
	r := newFieldReader(b[FrameHeaderSize:], "poll reply head")
	if Status(r.u16("status")) != StatusOK {
		return hd, false
	}
	var msg string
	r.str16(&msg, MaxTextLen, "message")
	hd.Partitions = int(r.u32("partitions"))
	readPollPartitionFields(&r, &hd.First)
	hd.BatchesLen = int(r.u32("batches"))
	if r.err != nil || hd.Partitions < 1 {
		return PollReplyHead{}, false
	}
	return hd, true
}
