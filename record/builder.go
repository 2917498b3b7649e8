package record

import (
	"encoding/binary"
	"fmt"
	"math/bits"
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
	// buf holds the records from recAt on. It is the builder's own buffer
	// (recAt 0), or, between ResetInPlace and FinishInPlace, the caller's
	// (recAt past the caller's bytes and the header's room).
	buf         []byte
	recAt       int
	own         []byte // the builder's own buffer while buf is the caller's
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
	scratch     []byte // compressed records of an in-place batch
}

// Reset empties the builder, keeping its buffers.
func (b *BatchBuilder) Reset() {
	own := b.buf
	if b.inPlace() {
		own = b.own
	}
	*b = BatchBuilder{buf: own[:0], scratch: b.scratch[:0]}
}

// ResetInPlace empties the builder and has it build the next batch at the
// end of dst: records go straight into dst behind room for the batch
// header, so FinishInPlace completes an uncompressed batch without copying
// it. A producer builds its batch inside its request frame this way. The
// builder holds on to dst until FinishInPlace or the next Reset.
func (b *BatchBuilder) ResetInPlace(dst []byte) {
	b.Reset()
	own := b.buf
	*b = BatchBuilder{buf: append(dst, make([]byte, BatchHeaderSize)...), own: own, scratch: b.scratch}
	b.recAt = len(b.buf)
}

// inPlace reports whether the builder builds in a caller's slice.
func (b *BatchBuilder) inPlace() bool { return b.recAt > 0 }

// SetProducer sets the idempotent producer fields of the batch: producer
// id (0 = none), epoch, and the sequence of the first record (-1 = none).
func (b *BatchBuilder) SetProducer(id uint64, epoch uint32, baseSequence int32) {
	b.producerID, b.producerEp, b.baseSeq, b.seqSet = id, epoch, baseSequence, true
}

// Len returns the number of records appended so far.
func (b *BatchBuilder) Len() int { return int(b.count) }

// Size returns the uncompressed size of the batch built so far.
func (b *BatchBuilder) Size() int { return BatchHeaderSize + len(b.buf) - b.recAt }

func (b *BatchBuilder) records() []byte { return b.buf[b.recAt:] }

// Append adds r at the next consecutive offset; r.Offset is ignored.
func (b *BatchBuilder) Append(r Record) {
	if b.count > 0 && b.withOffsets {
		b.setErr(fmt.Errorf("record: BatchBuilder: Append after AppendWithOffset"))
		return
	}
	b.add(r, b.count, nil, false)
}

// AppendParts is Append with a value made of parts, joined in the batch
// (r.Value is ignored; the value is never null): a value assembled from
// pieces is copied once, into the batch.
func (b *BatchBuilder) AppendParts(r Record, valueParts [][]byte) {
	if b.count > 0 && b.withOffsets {
		b.setErr(fmt.Errorf("record: BatchBuilder: Append after AppendWithOffset"))
		return
	}
	b.add(r, b.count, valueParts, true)
}

// AppendWithOffset adds r keeping r.Offset, which must be larger than the
// offset of the previous record and less than 2^32 past the first one.
func (b *BatchBuilder) AppendWithOffset(r Record) {
	if b.count == 0 {
		b.withOffsets, b.base = true, r.Offset
	} else if !b.withOffsets {
		b.setErr(fmt.Errorf("record: BatchBuilder: AppendWithOffset after Append"))
		return
	}
	d := r.Offset - b.base
	if r.Offset < b.base || d > 1<<32-1 || (b.count > 0 && d <= uint64(b.lastDelta)) {
		b.setErr(fmt.Errorf("record: BatchBuilder: offset %d does not follow %d", r.Offset, b.base+uint64(b.lastDelta)))
		return
	}
	b.add(r, uint32(d), nil, false)
}

func (b *BatchBuilder) setErr(err error) {
	if b.err == nil {
		b.err = err
	}
}

// add appends r at delta; with parted, its value is valueParts joined.
func (b *BatchBuilder) add(r Record, delta uint32, valueParts [][]byte, parted bool) {
	if b.count == 0 {
		b.baseTS, b.maxTS = r.Timestamp, r.Timestamp
	} else if r.Timestamp > b.maxTS {
		b.maxTS = r.Timestamp
	}
	// The body is written straight behind its length, so the length is
	// worked out first.
	tsDelta := r.Timestamp - b.baseTS
	valueLen := nullableLen(r.Value)
	partsLen := 0
	if parted {
		for _, p := range valueParts {
			partsLen += len(p)
		}
		valueLen = varintLen(int64(partsLen)) + partsLen
	}
	n := varintLen(int64(delta)) + varintLen(tsDelta) + nullableLen(r.Key) + valueLen +
		uvarintLen(uint64(len(r.Headers)))
	for _, h := range r.Headers {
		n += uvarintLen(uint64(len(h.Key))) + len(h.Key) + nullableLen(h.Value)
	}
	body := binary.AppendVarint(b.buf, int64(n))
	body = binary.AppendVarint(body, int64(delta))
	body = binary.AppendVarint(body, tsDelta)
	body = appendNullable(body, r.Key)
	if parted {
		body = binary.AppendVarint(body, int64(partsLen))
		for _, p := range valueParts {
			body = append(body, p...)
		}
	} else {
		body = appendNullable(body, r.Value)
	}
	body = binary.AppendUvarint(body, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		body = binary.AppendUvarint(body, uint64(len(h.Key)))
		body = append(body, h.Key...)
		body = appendNullable(body, h.Value)
	}
	b.buf = body
	b.count++
	b.lastDelta = delta
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

func varintLen(x int64) int { return uvarintLen(uint64(x<<1) ^ uint64(x>>63)) }

func nullableLen(v []byte) int {
	if v == nil {
		return 1
	}
	return varintLen(int64(len(v))) + len(v)
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
	if err := b.check(c); err != nil {
		return dst, err
	}
	records := b.records()
	start := len(dst)
	if c == CompressionNone {
		dst = growTo(dst, BatchHeaderSize+len(records))
	}
	dst = append(dst, make([]byte, BatchHeaderSize)...)
	dst, err := compressRecords(dst, records, c)
	if err != nil {
		return dst[:start], err
	}
	// A compressed section larger than the plain one is stored plain.
	if c != CompressionNone && len(dst)-start-BatchHeaderSize >= len(records) {
		dst = append(dst[:start+BatchHeaderSize], records...)
		c = CompressionNone
	}
	if err := b.finish(dst[start:], c, len(records)); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// FinishInPlace completes the batch begun by ResetInPlace and returns the
// slice given to it with the batch appended (grown if the records
// outgrew it). The builder lets go of that slice: Reset or ResetInPlace it
// before the next batch.
func (b *BatchBuilder) FinishInPlace(c Compression) ([]byte, error) {
	if !b.inPlace() {
		return nil, fmt.Errorf("record: BatchBuilder: FinishInPlace without ResetInPlace")
	}
	err := b.check(c)
	dst, start := b.buf, b.recAt-BatchHeaderSize
	b.buf, b.recAt, b.own = b.own[:0], 0, nil
	if err != nil {
		return dst[:start], err
	}
	plain := len(dst) - start - BatchHeaderSize
	if c != CompressionNone {
		out, err := compressRecords(b.scratch[:0], dst[start+BatchHeaderSize:], c)
		if err != nil {
			return dst[:start], err
		}
		b.scratch = out
		// A compressed section larger than the plain one is stored plain.
		if len(out) < plain {
			dst = append(dst[:start+BatchHeaderSize], out...)
		} else {
			c = CompressionNone
		}
	}
	if err := b.finish(dst[start:], c, plain); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

func (b *BatchBuilder) check(c Compression) error {
	switch {
	case b.err != nil:
		return b.err
	case b.count == 0:
		return fmt.Errorf("record: BatchBuilder: no records")
	case !c.Valid():
		return fmt.Errorf("record: unknown compression %d", c)
	case len(b.buf)-b.recAt > BatchMaxSize-BatchHeaderSize:
		return fmt.Errorf("%w: %d bytes of records", ErrBatchTooLarge, len(b.buf)-b.recAt)
	}
	return nil
}

// finish writes the header and checksum of batch, whose records section
// (plain length plain) is in place behind the header's room.
func (b *BatchBuilder) finish(batch []byte, c Compression, plain int) error {
	n := len(batch)
	if n > BatchMaxSize {
		return fmt.Errorf("%w: %d bytes", ErrBatchTooLarge, n)
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
		UncompressedLen: uint32(plain),
	}
	putBatchHeader(batch, &h)
	binary.LittleEndian.PutUint32(batch[12:], BatchChecksum(batch))
	return nil
}
