package record

import (
	"encoding/binary"
	"fmt"
)

// RecordIterator walks the records of one batch. It verifies the batch
// first (VerifyBatch), decompresses the records section into a buffer it
// owns and reuses across Reset calls, and checks every record as it goes:
// offsets increase and stay within the header's last offset delta, lengths
// stay within the section, and the count matches the header.
//
// A Record it returns aliases that buffer: its Key, Value and Headers are
// valid until the next call to Next or Reset. It never allocates more than
// the batch's declared uncompressed size (bounded by the maximum given to
// Reset), however the input lies.
//
// The zero value is ready for Reset.
type RecordIterator struct {
	hdr     BatchHeader
	buf     []byte // owned decompression buffer
	section []byte // the records section being walked
	pos     int
	seen    uint32
	prevDel int64
	headers []Header
	err     error
}

// NewRecordIterator returns an iterator over batch, verified against max
// (see VerifyBatch).
func NewRecordIterator(batch []byte, max int) (*RecordIterator, error) {
	it := &RecordIterator{}
	return it, it.Reset(batch, max)
}

// Reset verifies batch against max and positions the iterator before its
// first record. The iterator keeps a reference to batch when it is not
// compressed.
func (it *RecordIterator) Reset(batch []byte, max int) error {
	*it = RecordIterator{buf: it.buf, headers: it.headers[:0], prevDel: -1}
	h, err := VerifyBatch(batch, max)
	if err != nil {
		it.err = err
		return err
	}
	it.hdr = h
	raw := batch[BatchHeaderSize:h.Length]
	if h.Compression() == CompressionNone {
		it.section = raw
		return nil
	}
	it.buf, err = decompressRecords(it.buf, raw, h.Compression(), int(h.UncompressedLen))
	if err != nil {
		it.err = err
		return err
	}
	it.section = it.buf
	return nil
}

// Header returns the batch header of the current batch.
func (it *RecordIterator) Header() BatchHeader { return it.hdr }

// Err returns the error that stopped the iteration, if any.
func (it *RecordIterator) Err() error { return it.err }

// Next returns the next record, or false at the end of the batch or on an
// error (see Err).
func (it *RecordIterator) Next() (Record, bool) {
	if it.err != nil || it.section == nil {
		return Record{}, false
	}
	if it.seen == it.hdr.RecordCount {
		if it.pos != len(it.section) {
			it.fail("%d bytes after the last record", len(it.section)-it.pos)
		} else if it.prevDel != int64(it.hdr.LastOffsetDelta) {
			it.fail("last record has offset delta %d, header says %d", it.prevDel, it.hdr.LastOffsetDelta)
		}
		return Record{}, false
	}
	s := it.section
	bodyLen, pos := varintAt(s, it.pos)
	if pos < 0 || bodyLen < 5 || bodyLen > int64(len(s)-pos) {
		it.fail("record %d: body length %d", it.seen, bodyLen)
		return Record{}, false
	}
	end := pos + int(bodyLen)
	body := s[:end]
	var r Record
	delta, pos := varintAt(body, pos)
	if pos < 0 || delta <= it.prevDel || delta > int64(it.hdr.LastOffsetDelta) {
		it.fail("record %d: offset delta %d", it.seen, delta)
		return Record{}, false
	}
	tsDelta, pos := varintAt(body, pos)
	if pos < 0 {
		it.fail("record %d: timestamp", it.seen)
		return Record{}, false
	}
	if r.Key, pos = nullableAt(body, pos); pos < 0 {
		it.fail("record %d: key", it.seen)
		return Record{}, false
	}
	if r.Value, pos = nullableAt(body, pos); pos < 0 {
		it.fail("record %d: value", it.seen)
		return Record{}, false
	}
	nh, n := binary.Uvarint(body[pos:])
	if n <= 0 || nh > uint64(end-pos-n)/2 {
		it.fail("record %d: header count", it.seen)
		return Record{}, false
	}
	pos += n
	if nh > 0 {
		it.headers = it.headers[:0]
		for i := uint64(0); i < nh; i++ {
			kl, n := binary.Uvarint(body[pos:])
			if n <= 0 || kl > uint64(end-pos-n) {
				it.fail("record %d: header %d key", it.seen, i)
				return Record{}, false
			}
			pos += n
			key := string(body[pos : pos+int(kl)])
			pos += int(kl)
			var v []byte
			if v, pos = nullableAt(body, pos); pos < 0 {
				it.fail("record %d: header %d value", it.seen, i)
				return Record{}, false
			}
			it.headers = append(it.headers, Header{Key: key, Value: v})
		}
		r.Headers = it.headers
	}
	if pos != end {
		it.fail("record %d: %d bytes left in its body", it.seen, end-pos)
		return Record{}, false
	}
	it.pos = end
	r.Offset = it.hdr.BaseOffset + uint64(delta)
	if it.hdr.AppendTime() {
		r.Timestamp = it.hdr.MaxTimestamp
	} else {
		r.Timestamp = it.hdr.BaseTimestamp + tsDelta
	}
	it.prevDel = delta
	it.seen++
	return r, true
}

func (it *RecordIterator) fail(format string, args ...any) {
	it.err = fmt.Errorf("%w: "+format, append([]any{ErrCorruptBatch}, args...)...)
}

// varintAt decodes the zigzag varint at b[pos:] and returns it with the
// position after it, or a negative position when b holds none there. The
// one- and two-byte encodings (every length and delta of records under
// 8 KiB) take a path of their own: this runs several times per record.
func varintAt(b []byte, pos int) (int64, int) {
	if pos < 0 || pos >= len(b) {
		return 0, -1
	}
	if c := b[pos]; c < 0x80 {
		return int64(c>>1) ^ -int64(c&1), pos + 1
	}
	if pos+1 < len(b) && b[pos+1] < 0x80 {
		u := uint64(b[pos]&0x7f) | uint64(b[pos+1])<<7
		return int64(u>>1) ^ -int64(u&1), pos + 2
	}
	v, n := binary.Varint(b[pos:])
	if n <= 0 {
		return 0, -1
	}
	return v, pos + n
}

// nullableAt reads a varint length (-1 = null) at b[pos:] and that many
// bytes after it; it returns them with the position after them, or a
// negative position when they do not fit in b.
func nullableAt(b []byte, pos int) ([]byte, int) {
	l, p := varintAt(b, pos)
	switch {
	case p < 0 || l < -1 || l > int64(len(b)-p):
		return nil, -1
	case l == -1:
		return nil, p
	}
	e := p + int(l)
	return b[p:e:e], e
}
