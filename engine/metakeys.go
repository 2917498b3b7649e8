package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ledgemq/ledge/engine/internal/codec"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
)

// Metadata schema. Every key starts with a one-byte table tag; every value
// is a codec envelope (magic, version, length, CRC32C) of one of the kinds
// below. The schema key holds the schema version of the whole store: a
// store written by a newer schema is refused at Open.
//
//	"\x00schema"                      schema version
//	'N' name                          topic id of the live topic named name
//	'C' id                            topic record: name, config
//	'D' id                            deletion intent of topic id
//	'P' id part(be32)                 partition state
//	'R' id part                       producer-state snapshot
//	'B' id part consumer              bookmark
//	'S' 0 space 0 key                 node-scoped value of an owner
//	'S' 1 id space 0 key              topic-scoped value
//	'S' 2 id part space 0 key         partition-scoped value
//	'K'                               the engine's jump-free clock
//
// Every key of a topic contains its id, so a topic re-created under the
// same name shares no key with its predecessor, and deleting a topic is a
// handful of range deletions.
const schemaVersion = 1

const (
	kindSchema uint8 = iota + 1
	kindTopicName
	kindTopic
	kindDeletion
	kindPartition
	kindProducers
	kindBookmark
	kindValue
	kindClock
	kindIndex
)

const kindVersion = 1

// partStateVersion is the version of kindPartition values: version 2 added
// the cleanup obligation, the cut-after-checkpoint mark and the offset
// where numbering last resumed, version 3 the ranges recoveries skipped;
// versions 1 and 2 are still read.
const partStateVersion = 3

var schemaKey = []byte("\x00schema")

func topicNameKey(name string) []byte { return append([]byte{'N'}, name...) }

func topicKey(tag byte, id fence.TopicID) []byte {
	k := make([]byte, 0, 1+16+4)
	return append(append(k, tag), id[:]...)
}

func partKey(tag byte, id fence.TopicID, part int) []byte {
	return binary.BigEndian.AppendUint32(topicKey(tag, id), uint32(part))
}

func bookmarkKey(id fence.TopicID, part int, consumer string) []byte {
	return append(partKey('B', id, part), consumer...)
}

// prefixEnd returns the smallest key above every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// sealPartState seals a partition state in its current version.
func sealPartState(s *partState) []byte {
	payload := s.encode()
	return codec.Seal(make([]byte, 0, codec.EnvelopeSize+len(payload)), kindPartition, partStateVersion, payload)
}

func seal(kind uint8, payload []byte) []byte {
	return codec.Seal(make([]byte, 0, codec.EnvelopeSize+len(payload)), kind, kindVersion, payload)
}

// openValue opens an envelope of kind, mapping a newer version to
// ErrUnsupportedFormat and damage to a corruption error naming the key.
func openValue(key, v []byte, kind uint8) ([]byte, error) {
	p, _, err := openVersioned(key, v, kind, kindVersion)
	return p, err
}

// openVersioned is openValue for a kind whose values have several
// versions, up to maxVersion; it returns the payload's version.
func openVersioned(key, v []byte, kind uint8, maxVersion uint16) ([]byte, uint16, error) {
	p, version, err := codec.Open(v, kind, maxVersion)
	switch {
	case errors.Is(err, codec.ErrNewerVersion):
		return nil, 0, fmt.Errorf("%w: metadata key %q: %v", ErrUnsupportedFormat, key, err)
	case err != nil:
		return nil, 0, fmt.Errorf("engine: metadata key %q is corrupt: %w", key, err)
	}
	return p, version, nil
}

// topicRecord is the stored form of a topic.
type topicRecord struct {
	name    string
	id      fence.TopicID
	cfg     TopicConfig
	created int64 // unix ms
}

func (r *topicRecord) encode() []byte {
	b := codec.AppendBytes(nil, []byte(r.name))
	b = append(b, r.id[:]...)
	c := r.cfg
	for _, v := range []uint64{uint64(c.Partitions), uint64(c.Durability), uint64(c.SyncInterval),
		uint64(c.Compression), uint64(c.RetentionAge), uint64(c.RetentionBytes), uint64(c.SegmentBytes),
		uint64(c.SegmentAge), uint64(c.Timestamps), uint64(c.MaxBatchBytes)} {
		b = binary.AppendUvarint(b, v)
	}
	return binary.AppendVarint(b, r.created)
}

func decodeTopicRecord(p []byte) (topicRecord, error) {
	r := codec.NewReader(p)
	var t topicRecord
	t.name = string(r.Bytes())
	copy(t.id[:], r.Fixed(16))
	t.cfg.Partitions = int(r.Uvarint())
	t.cfg.Durability = Durability(r.Uvarint())
	t.cfg.SyncInterval = time.Duration(r.Uvarint())
	t.cfg.Compression = record.Compression(r.Uvarint())
	t.cfg.RetentionAge = time.Duration(r.Uvarint())
	t.cfg.RetentionBytes = int64(r.Uvarint())
	t.cfg.SegmentBytes = int64(r.Uvarint())
	t.cfg.SegmentAge = time.Duration(r.Uvarint())
	t.cfg.Timestamps = TimestampType(r.Uvarint())
	t.cfg.MaxBatchBytes = int(r.Uvarint())
	t.created = r.Varint()
	return t, r.Done()
}

// checkpoint is the last point of a partition's log known to be durable:
// everything in segment seg before byte pos was fsynced, and the log's
// records end at offset end there (numbering may resume above it after an
// unclean recovery; the gap holds no record). Recovery treats damage before it as corruption and
// damage after it as a torn tail.
type checkpoint struct {
	seg uint64 // base offset of the segment
	pos int64
	end uint64
}

// partState is the durable state of a partition.
type partState struct {
	start   uint64
	epoch   fence.HistoryEpoch
	lineage []fence.HistoryTransition
	// ceiling: no offset at or above it was ever handed out. (Under
	// always, offsets at or above the log's end were not seen either:
	// recovery resumes at the end.)
	ceiling uint64
	cp      checkpoint
	// clean: written by a clean shutdown; the next offset is ceiling and
	// nothing written was lost.
	clean bool
	// cleaned: the removal of every segment file wholly below this offset
	// is durable (the files were removed and the directory fsynced after).
	// cleaned < start is a pending cleanup obligation of a purge or of
	// retention, finished by the partition or, at the latest, by recovery.
	cleaned uint64
	// cutAfterCheckpoint: an fsync or write of the log failed; cp is the
	// exact durable end, and nothing after it may be trusted, even if a
	// later read finds it (after a failed fsync the page cache may hold
	// data that never reached the disk).
	cutAfterCheckpoint bool
	// resumed: where the last recovery resumed numbering. No offset in
	// [the log's end, resumed) was handed out, so a recovery that finds
	// the log ending below it lost nothing there.
	resumed uint64
	// gaps: the offset ranges recoveries skipped (numbering resumed above
	// the recovered end), which hold no record; in increasing order, only
	// those above the start, at most maxGaps (the oldest are dropped).
	gaps []OffsetRange
}

// cleanupPending reports whether segment files below the start offset may
// still exist.
func (s *partState) cleanupPending() bool { return s.cleaned < s.start }

func (s *partState) encode() []byte {
	b := binary.AppendUvarint(nil, s.start)
	b = binary.AppendUvarint(b, uint64(s.epoch))
	b = binary.AppendUvarint(b, s.ceiling)
	b = binary.AppendUvarint(b, s.cp.seg)
	b = binary.AppendUvarint(b, uint64(s.cp.pos))
	b = binary.AppendUvarint(b, s.cp.end)
	clean := byte(0)
	if s.clean {
		clean = 1
	}
	b = append(b, clean)
	b = binary.AppendUvarint(b, uint64(len(s.lineage)))
	for _, t := range s.lineage {
		b = binary.AppendUvarint(b, uint64(t.Epoch))
		b = binary.AppendUvarint(b, t.Start)
		b = append(b, byte(t.Kind))
		b = binary.AppendUvarint(b, t.KeptEnd)
	}
	// Version 2.
	b = binary.AppendUvarint(b, s.cleaned)
	cut := byte(0)
	if s.cutAfterCheckpoint {
		cut = 1
	}
	b = append(b, cut)
	b = binary.AppendUvarint(b, s.resumed)
	// Version 3.
	b = binary.AppendUvarint(b, uint64(len(s.gaps)))
	for _, g := range s.gaps {
		b = binary.AppendUvarint(b, g.From)
		b = binary.AppendUvarint(b, g.To-g.From)
	}
	return b
}

// decodePartState decodes a partition state of the given version. A
// version 1 state has no cleanup record: its cleanup is taken as pending,
// so that recovery checks the directory once.
func decodePartState(p []byte, version uint16) (partState, error) {
	r := codec.NewReader(p)
	var s partState
	s.start = r.Uvarint()
	s.epoch = fence.HistoryEpoch(r.Uvarint())
	s.ceiling = r.Uvarint()
	s.cp.seg = r.Uvarint()
	s.cp.pos = int64(r.Uvarint())
	s.cp.end = r.Uvarint()
	s.clean = r.Byte() == 1
	n := r.Count(4)
	s.lineage = make([]fence.HistoryTransition, n)
	for i := range s.lineage {
		s.lineage[i] = fence.HistoryTransition{
			Epoch: fence.HistoryEpoch(r.Uvarint()),
			Start: r.Uvarint(),
			Kind:  fence.TransitionKind(r.Byte()),
		}
		s.lineage[i].KeptEnd = r.Uvarint()
	}
	if version >= 2 {
		s.cleaned = r.Uvarint()
		s.cutAfterCheckpoint = r.Byte() == 1
		s.resumed = r.Uvarint()
	}
	if version >= 3 {
		n := r.Count(2)
		s.gaps = make([]OffsetRange, n)
		for i := range s.gaps {
			from := r.Uvarint()
			s.gaps[i] = OffsetRange{From: from, To: from + r.Uvarint()}
		}
	}
	if err := r.Done(); err != nil {
		return s, err
	}
	if s.epoch == 0 || len(s.lineage) == 0 || s.lineage[len(s.lineage)-1].Epoch != s.epoch {
		return s, fmt.Errorf("%w: history epoch %d does not end its lineage", codec.ErrCorrupt, s.epoch)
	}
	return s, nil
}

// bookmarkValue encodes a bookmark.
func (b Bookmark) encode() []byte {
	v := binary.AppendUvarint(nil, b.Offset)
	return binary.AppendUvarint(v, uint64(b.History))
}

func decodeBookmark(p []byte) (Bookmark, error) {
	r := codec.NewReader(p)
	b := Bookmark{Offset: r.Uvarint(), History: fence.HistoryEpoch(r.Uvarint())}
	return b, r.Done()
}
