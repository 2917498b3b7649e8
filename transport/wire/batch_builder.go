package wire

import (
	"encoding/binary"
	"fmt"
)

// Record is one message of a batch. Key and Value nil mean null; an empty
// non-nil slice is an empty value.
type Record struct {
	Offset    uint64
	Timestamp int64 // unix ms
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Header is one record header. A nil Value is null.
type Header struct {
	Key   string
	Value []byte
}

// BatchBuilder assembles a batch from records. The zero value is ready to
// use; Reset makes it reusable without reallocating.
//
// Records appended with Append get consecutive offsets from 0 (a producer's
// batch; the engine stamps the base). AppendWithOffset keeps each record's
// offset, which must increase: that is how a node builds a filtered batch
// with gaps. The two must not be mixed in one batch.
type BatchBuilder struct {
	records     []byte
	count       uint32
	base        uint64
	lastDelta   uint32
	baseTS      int64
	maxTS       int64
	producerID  uint64
	producerEp  uint32
	baseSeq     int32
	seqSet      bool
	withOffsets bool
	err         error
	scratch     []byte
}

// Reset empties the builder, keeping its buffers.
func (b *BatchBuilder) Reset() {
	*b = BatchBuilder{records: b.records[:0], scratch: b.scratch[:0]}
}

// SetProducer sets the idempotent producer fields of the batch: producer
// id (0 = none), epoch, and the sequence of the first record (-1 = none).
func (b *BatchBuilder) SetProducer(id uint64, epoch uint32, baseSequence int32) {
	b.producerID, b.producerEp, b.baseSeq, b.seqSet = id, epoch, baseSequence, true
}

// Len returns the number of records appended so far.
func (b *BatchBuilder) Len() int { return int(b.count) }

// Size returns the uncompressed size of the batch built so far.
func (b *BatchBuilder) Size() int { return BatchHeaderSize + len(b.records) }

// Append adds r at the next consecutive offset; r.Offset is ignored.
func (b *BatchBuilder) Append(r Record) {
	if b.count > 0 && b.withOffsets {
		b.setErr(fmt.Errorf("wire: BatchBuilder: Append after AppendWithOffset"))
		return
	}
	b.add(r, b.count)
}

// AppendWithOffset adds r keeping r.Offset, which must be larger than the
// offset of the previous record and less than 2^32 past the first one.
func (b *BatchBuilder) AppendWithOffset(r Record) {
	if b.count == 0 {
		b.withOffsets, b.base = true, r.Offset
	} else if !b.withOffsets {
		b.setErr(fmt.Errorf("wire: BatchBuilder: AppendWithOffset after Append"))
		return
	}
	d := r.Offset - b.base
	if r.Offset < b.base || d > 1<<32-1 || (b.count > 0 && d <= uint64(b.lastDelta)) {
		b.setErr(fmt.Errorf("wire: BatchBuilder: offset %d does not follow %d", r.Offset, b.base+uint64(b.lastDelta)))
		return
	}
	b.add(r, uint32(d))
}

func (b *BatchBuilder) setErr(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *BatchBuilder) add(r Record, delta uint32) {
	if b.count == 0 {
		b.baseTS, b.maxTS = r.Timestamp, r.Timestamp
	} else if r.Timestamp > b.maxTS {
		b.maxTS = r.Timestamp
	}
	body := b.scratch[:0]
	body = binary.AppendVarint(body, int64(delta))
	body = binary.AppendVarint(body, r.Timestamp-b.baseTS)
	body = appendNullable(body, r.Key)
	body = appendNullable(body, r.Value)
	body = binary.AppendUvarint(body, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		body = binary.AppendUvarint(body, uint64(len(h.Key)))
		body = append(body, h.Key...)
		body = appendNullable(body, h.Value)
	}
	b.scratch = body
	b.records = binary.AppendVarint(b.records, int64(len(body)))
	b.records = append(b.records, body...)
	b.count++
	b.lastDelta = delta
}

func appendNullable(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// Build returns a new batch holding the records appended so far, its
// records section compressed with c, its base offset set to the first
// record's offset (0 for Append). The builder keeps its records: Reset it
// to start the next batch.
func (b *BatchBuilder) Build(c Compression) ([]byte, error) {
	return b.AppendBatch(nil, c)
}

// AppendBatch is Build appending the batch to dst.
func (b *BatchBuilder) AppendBatch(dst []byte, c Compression) ([]byte, error) {
	switch {
	case b.err != nil:
		return dst, b.err
	case b.count == 0:
		return dst, fmt.Errorf("wire: BatchBuilder: no records")
	case !c.Valid():
		return dst, fmt.Errorf("wire: unknown compression %d", c)
	case len(b.records) > BatchMaxSize-BatchHeaderSize:
		return dst, fmt.Errorf("%w: %d bytes of records", ErrBatchTooLarge, len(b.records))
	}
	start := len(dst)
	if c == CompressionNone {
		dst = growTo(dst, BatchHeaderSize+len(b.records))
	}
	dst = append(dst, make([]byte, BatchHeaderSize)...)
	dst, err := compressRecords(dst, b.records, c)
	if err != nil {
		return dst[:start], err
	}
	// A compressed section larger than the plain one is stored plain.
	if c != CompressionNone && len(dst)-start-BatchHeaderSize >= len(b.records) {
		dst = append(dst[:start+BatchHeaderSize], b.records...)
		c = CompressionNone
	}
	n := len(dst) - start
	if n > BatchMaxSize {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrBatchTooLarge, n)
	}
	seq := int32(-1)
	if b.seqSet {
		seq = b.baseSeq
	}
	h := BatchHeader{
		Version:         BatchVersion,
		Attributes:      uint8(c),
		Length:          uint32(n),
		BaseOffset:      b.base,
		LastOffsetDelta: b.lastDelta,
		RecordCount:     b.count,
		BaseTimestamp:   b.baseTS,
		MaxTimestamp:    b.maxTS,
		ProducerID:      b.producerID,
		ProducerEpoch:   b.producerEp,
		BaseSequence:    seq,
		UncompressedLen: uint32(len(b.records)),
	}
	batch := dst[start:]
	putBatchHeader(batch, &h)
	binary.LittleEndian.PutUint32(batch[12:], BatchChecksum(batch))
	return dst, nil
}
