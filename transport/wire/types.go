package wire

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ledgemq/ledge/record"
)

// Durability is a topic's acknowledgement policy.
type Durability uint8

// Durability policies. The zero value asks for the node's default.
const (
	DurabilityDefault  Durability = 0
	DurabilityAlways   Durability = 1 // acknowledge after fsync (group commit)
	DurabilityInterval Durability = 2 // fsync at least every SyncInterval
	DurabilityNone     Durability = 3 // acknowledge from the page cache
	durabilityMax                 = DurabilityNone
)

// String returns the policy's name as the CLI spells it.
func (d Durability) String() string {
	switch d {
	case DurabilityDefault:
		return "default"
	case DurabilityAlways:
		return "always"
	case DurabilityInterval:
		return "interval"
	case DurabilityNone:
		return "none"
	}
	return "durability(" + strconv.Itoa(int(d)) + ")"
}

// TimestampMode says whose clock stamps a topic's records.
type TimestampMode uint8

// Timestamp modes. The zero value asks for the node's default (producer).
const (
	TimestampModeDefault  TimestampMode = 0
	TimestampModeProducer TimestampMode = 1 // keep the producer's timestamps
	TimestampModeAppend   TimestampMode = 2 // the node stamps append time
	timestampModeMax                    = TimestampModeAppend
)

// String returns the mode's name as the CLI spells it.
func (m TimestampMode) String() string {
	switch m {
	case TimestampModeDefault:
		return "default"
	case TimestampModeProducer:
		return "producer"
	case TimestampModeAppend:
		return "append"
	}
	return "timestamps(" + strconv.Itoa(int(m)) + ")"
}

// TopicConfig is a topic's configuration. In CreateTopic, a zero field
// asks for the node's default, except the retention limits, where zero
// means "keep forever". Replies carry the effective values.
//
//	off size field
//	 0   4   partitions
//	 4   1   durability
//	 5   1   compression (0 none, 1 s2, 2 zstd: the record batch codes)
//	 6   1   timestamps
//	 7   1   reserved, zero
//	 8   8   sync interval, ns
//	16   8   retention age, ns
//	24   8   retention bytes (per partition)
//	32   8   segment bytes
//	40   8   segment age, ns
//	48   4   max batch bytes
type TopicConfig struct {
	Partitions   uint32
	Durability   Durability
	SyncInterval time.Duration // DurabilityInterval's fsync interval
	// Compression is the codec producers use for the topic by default.
	Compression    record.Compression
	RetentionAge   time.Duration
	RetentionBytes uint64
	SegmentBytes   uint64
	SegmentAge     time.Duration
	Timestamps     TimestampMode
	MaxBatchBytes  uint32
}

const topicConfigSize = 52

func (c *TopicConfig) put(w *fieldWriter) {
	w.u32(c.Partitions)
	w.enum(uint8(c.Durability), uint8(durabilityMax), "durability")
	if !c.Compression.Valid() {
		w.fail(StatusInvalidArgument, "compression: unknown value %d", uint8(c.Compression))
	}
	w.u8(uint8(c.Compression))
	w.enum(uint8(c.Timestamps), uint8(timestampModeMax), "timestamps")
	w.zero(1)
	w.duration(c.SyncInterval, "sync interval")
	w.duration(c.RetentionAge, "retention age")
	w.u64(c.RetentionBytes)
	w.u64(c.SegmentBytes)
	w.duration(c.SegmentAge, "segment age")
	w.u32(c.MaxBatchBytes)
}

func (c *TopicConfig) get(r *fieldReader) {
	c.Partitions = r.u32("partitions")
	c.Durability = Durability(r.enum(uint8(durabilityMax), "durability"))
	c.Compression = record.Compression(r.u8("compression"))
	if !c.Compression.Valid() {
		r.fail("compression: unknown value %d", uint8(c.Compression))
	}
	c.Timestamps = TimestampMode(r.enum(uint8(timestampModeMax), "timestamps"))
	r.zero(1, "reserved")
	c.SyncInterval = r.duration("sync interval")
	c.RetentionAge = r.duration("retention age")
	c.RetentionBytes = r.u64("retention bytes")
	c.SegmentBytes = r.u64("segment bytes")
	c.SegmentAge = r.duration("segment age")
	c.MaxBatchBytes = r.u32("max batch bytes")
}

// TopicInfo names a topic, its identity and its configuration.
//
//	name str16 | topic id [16] | config (52 bytes)
type TopicInfo struct {
	Name string
	// ID is the topic's identity, random per creation: a topic deleted and
	// re-created under the same name has another ID.
	ID     [16]byte
	Config TopicConfig
}

const topicInfoMinSize = 2 + 16 + topicConfigSize

func (t *TopicInfo) put(w *fieldWriter) {
	w.str16(t.Name, MaxNameLen, "topic")
	w.fixed(t.ID[:])
	t.Config.put(w)
}

func (t *TopicInfo) get(r *fieldReader) {
	r.str16(&t.Name, MaxNameLen, "topic")
	copy(t.ID[:], r.fixed(16, "topic id"))
	t.Config.get(r)
}

// PartitionState is a partition's range and history, or why it has none.
//
//	partition u32 | status u16 | message str16 | start offset u64 |
//	high watermark u64 | history epoch u64
type PartitionState struct {
	Partition uint32
	// Status is StatusOK, or why the partition could not be described or
	// changed (StatusUnknownPartition, StatusPartitionFailed, ...).
	Status  Status
	Message string
	// StartOffset is the first offset a reader may read.
	StartOffset uint64
	// HighWatermark is the exclusive end of what readers may see.
	HighWatermark uint64
	// History is the partition's history epoch: purge and lossy recovery
	// raise it.
	History uint64
	// Skipped is how many offsets in [StartOffset, HighWatermark) hold no
	// record because a recovery skipped them, so the partition holds
	// HighWatermark − StartOffset − Skipped records (less what retention
	// has not yet reached). Only DescribeTopicReply carries it, and only
	// when the request asked; the other replies leave it out.
	Skipped uint64
}

const partitionStateMinSize = 4 + 2 + 2 + 3*8

func (p *PartitionState) put(w *fieldWriter) {
	w.u32(p.Partition)
	w.u16(uint16(p.Status))
	w.text(p.Message)
	w.u64(p.StartOffset)
	w.u64(p.HighWatermark)
	w.u64(p.History)
}

func (p *PartitionState) get(r *fieldReader) {
	p.Partition = r.u32("partition")
	p.Status = Status(r.u16("status"))
	r.str16(&p.Message, MaxTextLen, "message")
	p.StartOffset = r.u64("start offset")
	p.HighWatermark = r.u64("high watermark")
	p.History = r.u64("history")
	p.Skipped = 0
}

func putPartitionStates(w *fieldWriter, ps []PartitionState) {
	w.count(len(ps), "partitions")
	for i := range ps {
		ps[i].put(w)
	}
}

func getPartitionStates(r *fieldReader, ps []PartitionState) []PartitionState {
	ps = resize(ps, r.count(partitionStateMinSize, "partitions"))
	for i := range ps {
		ps[i].get(r)
	}
	return ps
}

func putPartitionIndexes(w *fieldWriter, ps []uint32) {
	w.count(len(ps), "partitions")
	for _, p := range ps {
		w.u32(p)
	}
}

func getPartitionIndexes(r *fieldReader, ps []uint32) []uint32 {
	ps = resize(ps, r.count(4, "partitions"))
	for i := range ps {
		ps[i] = r.u32("partition")
	}
	return ps
}

// Scope is a set of permissions a token grants on its topic.
type Scope uint8

// Scopes.
const (
	ScopeProduce Scope = 1 << 0 // produce, init producer
	ScopeConsume Scope = 1 << 1 // poll, commit, reset, attach, read offsets and state
	ScopeAdmin   Scope = 1 << 2 // create, delete, purge topics; manage tokens
	scopeAll           = ScopeProduce | ScopeConsume | ScopeAdmin
)

// Has reports whether s grants every scope of want.
func (s Scope) Has(want Scope) bool { return s&want == want }

// String lists the scopes as the CLI spells them: "produce,consume".
func (s Scope) String() string {
	var parts []string
	if s&ScopeProduce != 0 {
		parts = append(parts, "produce")
	}
	if s&ScopeConsume != 0 {
		parts = append(parts, "consume")
	}
	if s&ScopeAdmin != 0 {
		parts = append(parts, "admin")
	}
	if rest := s &^ scopeAll; rest != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(rest), 16))
	}
	return strings.Join(parts, ",")
}

func (w *fieldWriter) scope(s Scope) {
	if s&^scopeAll != 0 {
		w.fail(StatusInvalidArgument, "unknown scope bits 0x%02x", uint8(s&^scopeAll))
	}
	w.u8(uint8(s))
}

func (r *fieldReader) scope() Scope {
	s := Scope(r.u8("scopes"))
	if s&^scopeAll != 0 {
		r.fail("scopes: unknown bits 0x%02x", uint8(s&^scopeAll))
		return 0
	}
	return s
}

// AllTopics as a token's topic grants its scopes on every topic.
const AllTopics = "*"

// CheckTopicName accepts 1 to MaxNameLen bytes of letters, digits, '.',
// '_' and '-', other than "." and "..": names appear in file paths and
// CLI arguments. A name it refuses is a StatusInvalidArgument Error.
func CheckTopicName(name string) error {
	if name == "" || len(name) > MaxNameLen || name == "." || name == ".." {
		return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("topic name %q: want 1 to %d characters, not . or ..", name, MaxNameLen)}
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("topic name %q: only letters, digits, '.', '_' and '-' are allowed", name)}
		}
	}
	return nil
}
