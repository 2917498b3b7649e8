package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record batch format, version 1. A batch is what a producer sends, what
// the engine stores and what an unfiltered consumer receives, byte for byte:
// the engine only stamps the base offset (outside the CRC) and, for topics
// with append-time timestamps, the timestamps (re-computing the CRC).
//
// All integers are little-endian.
//
//	off size field
//	 0   4   magic            the bytes "LDGB" (BatchMagic as a little-endian u32)
//	 4   1   version          1
//	 5   1   attributes       bits 0-2 compression; bit 3 append-time timestamps
//	 6   2   reserved         0
//	 8   4   length           whole batch incl. this header; > BatchHeaderSize
//	12   4   crc              CRC32C over [4:12) and [24:length)
//	16   8   baseOffset       stamped by the engine
//	24   4   lastOffsetDelta  offset of the last record - baseOffset
//	28   4   recordCount      > 0
//	32   8   baseTimestamp    unix ms
//	40   8   maxTimestamp     unix ms
//	48   8   producerID       0 = none
//	56   4   producerEpoch
//	60   4   baseSequence     int32, -1 = none
//	64   4   uncompressedLen  length of the records section uncompressed
//	68   4   reserved         0
//	72   ..  records section, compressed as the attributes say
//
// A record: varint bodyLen (bytes after this field), varint offsetDelta,
// varint timestampDelta, varint keyLen (-1 = null), key, varint valueLen
// (-1 = null), value, uvarint headerCount, then per header: uvarint
// keyLen, key, varint valueLen (-1 = null), value. "varint" is the
// zig-zag signed encoding of encoding/binary, "uvarint" the unsigned one.
//
// Zero bytes are never a batch: the magic is checked first and a length
// must be larger than the header, so the zero-filled tail a crash leaves in
// a file ends a log instead of being read as records.
const (
	// BatchMagic is the first four bytes of every batch, "LDGB" on disk.
	BatchMagic uint32 = 'L' | 'D'<<8 | 'G'<<16 | 'B'<<24
	// BatchVersion is the only format version this package reads and writes.
	BatchVersion = 1
	// BatchHeaderSize is the size of the fixed batch header.
	BatchHeaderSize = 72
	// BatchMaxSize is the hard upper bound of a batch (and of its
	// uncompressed records section), whatever limit a caller configures.
	BatchMaxSize = 64 << 20

	// BatchAttrCompressionMask selects the compression bits of the attributes.
	BatchAttrCompressionMask = 0x07
	// BatchAttrAppendTime marks a batch whose timestamps were set by the
	// engine at append: every record's timestamp is the batch's max timestamp.
	BatchAttrAppendTime = 0x08

	batchAttrKnown = BatchAttrCompressionMask | BatchAttrAppendTime
)

// Errors of the batch codec. None of them is retryable: the same bytes fail
// the same way.
var (
	// ErrCorruptBatch: the bytes are not a well-formed batch (bad magic,
	// length, CRC, records, or compressed data).
	ErrCorruptBatch = errors.New("record: corrupt record batch")
	// ErrBatchTooLarge: the batch or its uncompressed records exceed the limit.
	ErrBatchTooLarge = errors.New("record: record batch too large")
	// ErrUnsupportedVersion: the batch has a format version newer than this
	// package knows; upgrade the reader.
	ErrUnsupportedVersion = errors.New("record: unsupported record batch version")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Compression is the codec of a batch's records section.
type Compression uint8

// Compressions. The values are the attribute bits on the wire.
const (
	CompressionNone Compression = 0
	CompressionS2   Compression = 1
	CompressionZstd Compression = 2
)

// String returns the codec's lowercase name.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionS2:
		return "s2"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// ParseCompression maps "none", "s2" and "zstd" to their Compression.
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "none", "":
		return CompressionNone, nil
	case "s2":
		return CompressionS2, nil
	case "zstd":
		return CompressionZstd, nil
	}
	return 0, fmt.Errorf("record: unknown compression %q (want none, s2 or zstd)", s)
}

// Valid reports whether c is a known codec.
func (c Compression) Valid() bool { return c <= CompressionZstd }

// BatchHeader is the parsed fixed header of a batch.
type BatchHeader struct {
	Version         uint8
	Attributes      uint8
	Length          uint32
	CRC             uint32
	BaseOffset      uint64
	LastOffsetDelta uint32
	RecordCount     uint32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      uint64
	ProducerEpoch   uint32
	BaseSequence    int32
	UncompressedLen uint32
}

// Compression returns the codec of the records section.
func (h BatchHeader) Compression() Compression {
	return Compression(h.Attributes & BatchAttrCompressionMask)
}

// AppendTime reports whether the engine stamped the timestamps at append.
func (h BatchHeader) AppendTime() bool { return h.Attributes&BatchAttrAppendTime != 0 }

// LastOffset returns the offset of the batch's last record.
func (h BatchHeader) LastOffset() uint64 { return h.BaseOffset + uint64(h.LastOffsetDelta) }

// ParseBatchHeader parses and checks the fixed header at the start of b.
// It checks magic, version, attributes, reserved fields, the length
// against the header size and BatchMaxSize, and the record count; it does
// not check that b holds the whole batch nor the CRC (see VerifyBatch).
// A header whose magic does not match (zeros, say) is ErrCorruptBatch.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	le := binary.LittleEndian
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorruptBatch, len(b))
	}
	if m := le.Uint32(b); m != BatchMagic {
		return BatchHeader{}, fmt.Errorf("%w: bad magic %#08x", ErrCorruptBatch, m)
	}
	h := BatchHeader{
		Version:         b[4],
		Attributes:      b[5],
		Length:          le.Uint32(b[8:]),
		CRC:             le.Uint32(b[12:]),
		BaseOffset:      le.Uint64(b[16:]),
		LastOffsetDelta: le.Uint32(b[24:]),
		RecordCount:     le.Uint32(b[28:]),
		BaseTimestamp:   int64(le.Uint64(b[32:])),
		MaxTimestamp:    int64(le.Uint64(b[40:])),
		ProducerID:      le.Uint64(b[48:]),
		ProducerEpoch:   le.Uint32(b[56:]),
		BaseSequence:    int32(le.Uint32(b[60:])),
		UncompressedLen: le.Uint32(b[64:]),
	}
	switch {
	case h.Version == 0:
		return h, fmt.Errorf("%w: version 0", ErrCorruptBatch)
	case h.Version > BatchVersion:
		return h, fmt.Errorf("%w: version %d (this build reads version %d)", ErrUnsupportedVersion, h.Version, BatchVersion)
	case h.Attributes&^batchAttrKnown != 0 || !h.Compression().Valid():
		return h, fmt.Errorf("%w: unknown attributes %#02x", ErrCorruptBatch, h.Attributes)
	case le.Uint16(b[6:]) != 0 || le.Uint32(b[68:]) != 0:
		return h, fmt.Errorf("%w: reserved bytes are not zero", ErrCorruptBatch)
	case h.Length <= BatchHeaderSize:
		return h, fmt.Errorf("%w: length %d", ErrCorruptBatch, h.Length)
	case h.Length > BatchMaxSize:
		return h, fmt.Errorf("%w: length %d > %d", ErrBatchTooLarge, h.Length, BatchMaxSize)
	case h.RecordCount == 0 || uint64(h.RecordCount) > uint64(h.LastOffsetDelta)+1:
		return h, fmt.Errorf("%w: %d records for last offset delta %d", ErrCorruptBatch, h.RecordCount, h.LastOffsetDelta)
	case h.Compression() == CompressionNone && h.UncompressedLen != h.Length-BatchHeaderSize:
		return h, fmt.Errorf("%w: uncompressed length %d, records section %d", ErrCorruptBatch, h.UncompressedLen, h.Length-BatchHeaderSize)
	case h.UncompressedLen > BatchMaxSize:
		return h, fmt.Errorf("%w: uncompressed length %d > %d", ErrBatchTooLarge, h.UncompressedLen, BatchMaxSize)
	}
	// Every record takes at least 6 bytes uncompressed (bodyLen and five
	// one-byte fields), which bounds what a lying count can make us expect.
	if uint64(h.RecordCount)*6 > uint64(h.UncompressedLen) {
		return h, fmt.Errorf("%w: %d records cannot fit %d bytes", ErrCorruptBatch, h.RecordCount, h.UncompressedLen)
	}
	return h, nil
}

// VerifyBatch checks that b is exactly one well-formed batch of at most max
// bytes (BatchMaxSize if max <= 0 or larger): its header, its length equal
// to len(b), its uncompressed size within max, and its CRC. It does not
// decompress the records; RecordIterator checks them.
func VerifyBatch(b []byte, max int) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	if max <= 0 || max > BatchMaxSize {
		max = BatchMaxSize
	}
	switch {
	case int64(h.Length) > int64(max) || int64(h.UncompressedLen) > int64(max):
		return h, fmt.Errorf("%w: %d bytes (%d uncompressed), limit %d", ErrBatchTooLarge, h.Length, h.UncompressedLen, max)
	case int(h.Length) != len(b):
		return h, fmt.Errorf("%w: length field %d, have %d bytes", ErrCorruptBatch, h.Length, len(b))
	}
	if c := BatchChecksum(b); c != h.CRC {
		return h, fmt.Errorf("%w: crc %#08x, computed %#08x", ErrCorruptBatch, h.CRC, c)
	}
	return h, nil
}

// BatchChecksum computes the CRC32C of a whole batch b as the header's crc
// field should hold it: over bytes [4:12) and [24:len(b)).
func BatchChecksum(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[4:12])
	return crc32.Update(c, castagnoli, b[24:])
}

// StampBaseOffset sets the base offset of the batch b. The base offset is
// outside the CRC, so the batch stays valid.
func StampBaseOffset(b []byte, base uint64) {
	binary.LittleEndian.PutUint64(b[16:], base)
}

// StampAppendTime marks the batch b as carrying append-time timestamps and
// sets its base and max timestamp to ts (unix ms), re-computing the CRC.
// Readers then take ts as every record's timestamp.
func StampAppendTime(b []byte, ts int64) {
	le := binary.LittleEndian
	b[5] |= BatchAttrAppendTime
	le.PutUint64(b[32:], uint64(ts))
	le.PutUint64(b[40:], uint64(ts))
	le.PutUint32(b[12:], BatchChecksum(b))
}

// putBatchHeader writes h into b[:BatchHeaderSize], computing nothing.
func putBatchHeader(b []byte, h *BatchHeader) {
	le := binary.LittleEndian
	le.PutUint32(b, BatchMagic)
	b[4] = h.Version
	b[5] = h.Attributes
	le.PutUint16(b[6:], 0)
	le.PutUint32(b[8:], h.Length)
	le.PutUint32(b[12:], h.CRC)
	le.PutUint64(b[16:], h.BaseOffset)
	le.PutUint32(b[24:], h.LastOffsetDelta)
	le.PutUint32(b[28:], h.RecordCount)
	le.PutUint64(b[32:], uint64(h.BaseTimestamp))
	le.PutUint64(b[40:], uint64(h.MaxTimestamp))
	le.PutUint64(b[48:], h.ProducerID)
	le.PutUint32(b[56:], h.ProducerEpoch)
	le.PutUint32(b[60:], uint32(h.BaseSequence))
	le.PutUint32(b[64:], h.UncompressedLen)
	le.PutUint32(b[68:], 0)
}
