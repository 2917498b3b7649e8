package abi

import (
	"errors"
	"fmt"
)

// ErrBadRegion reports an input region that does not follow the layout.
// Hosts never produce one; the error is not retryable.
var ErrBadRegion = errors.New("abi: malformed input region")

// View reads an input region in place. It allocates nothing per record:
// keys, values and headers are subslices of the region.
type View struct {
	b     []byte
	count int
	hdrs  int
	nh    int
}

// Parse checks the header of region and returns a View of it. It checks
// that the sections lie within the region; it trusts the spans of
// individual records, which the host wrote (a bad span panics on access).
func Parse(region []byte) (View, error) {
	if len(region) < HeaderSize {
		return View{}, fmt.Errorf("%w: %d bytes", ErrBadRegion, len(region))
	}
	if m := le.Uint32(region[offMagic:]); m != InputMagic {
		return View{}, fmt.Errorf("%w: magic %#08x", ErrBadRegion, m)
	}
	if v := le.Uint32(region[offVersion:]); v != Version {
		return View{}, fmt.Errorf("%w: version %d, want %d", ErrBadRegion, v, Version)
	}
	size := uint64(le.Uint32(region[offSize:]))
	count := uint64(le.Uint32(region[offCount:]))
	recs := uint64(le.Uint32(region[offRecordsOff:]))
	hdrs := uint64(le.Uint32(region[offHeadersOff:]))
	nh := uint64(le.Uint32(region[offHeaderCount:]))
	aoff := uint64(le.Uint32(region[offAnswerOff:]))
	acap := uint64(le.Uint32(region[offAnswerCap:]))
	toff := uint64(le.Uint32(region[offTopicOff:]))
	tlen := uint64(le.Uint32(region[offTopicLen:]))
	switch {
	case size > uint64(len(region)):
		return View{}, fmt.Errorf("%w: size %d, have %d bytes", ErrBadRegion, size, len(region))
	case recs != HeaderSize || recs+count*RecordEntrySize != hdrs || hdrs+nh*HeaderEntrySize > aoff:
		return View{}, fmt.Errorf("%w: sections out of place", ErrBadRegion)
	case aoff+acap != size || acap < uint64(BitmapSize(int(count))) || acap < ProposalSize:
		return View{}, fmt.Errorf("%w: answer area %d+%d", ErrBadRegion, aoff, acap)
	case toff+tlen > aoff:
		return View{}, fmt.Errorf("%w: topic span", ErrBadRegion)
	}
	return View{b: region[:size], count: int(count), hdrs: int(hdrs), nh: int(nh)}, nil
}

// Len returns the number of records.
func (v *View) Len() int { return v.count }

// From returns the position the poll read from.
func (v *View) From() uint64 { return le.Uint64(v.b[offFrom:]) }

// Next returns the position after this result.
func (v *View) Next() uint64 { return le.Uint64(v.b[offNext:]) }

// Partition returns the partition the records come from.
func (v *View) Partition() int32 { return int32(le.Uint32(v.b[offPartition:])) }

// Topic returns the topic name, aliasing the region.
func (v *View) Topic() []byte {
	off, n := le.Uint32(v.b[offTopicOff:]), le.Uint32(v.b[offTopicLen:])
	return v.b[off : off+n : off+n]
}

// Answer returns the answer area of the region.
func (v *View) Answer() []byte {
	off, n := le.Uint32(v.b[offAnswerOff:]), le.Uint32(v.b[offAnswerCap:])
	return v.b[off : off+n : off+n]
}

// Bytes returns the whole region.
func (v *View) Bytes() []byte { return v.b }

// Record returns record i, 0 <= i < Len().
func (v *View) Record(i int) Record {
	if uint(i) >= uint(v.count) {
		panic(fmt.Sprintf("abi: record %d of %d", i, v.count))
	}
	return Record{b: v.b, e: HeaderSize + i*RecordEntrySize, hdrs: v.hdrs}
}

// Record is one record of a View. Its accessors return subslices of the
// region; copy what must outlive the call.
type Record struct {
	b    []byte
	e    int // offset of the record entry
	hdrs int // offset of the header table
}

// Offset returns the record's offset in its partition.
func (r Record) Offset() uint64 { return le.Uint64(r.b[r.e:]) }

// Timestamp returns the record's timestamp in unix milliseconds.
func (r Record) Timestamp() int64 { return int64(le.Uint64(r.b[r.e+8:])) }

// Key returns the key, nil when null.
func (r Record) Key() []byte { return span(r.b, r.e+16) }

// Value returns the value, nil when null.
func (r Record) Value() []byte { return span(r.b, r.e+24) }

// HeaderCount returns the number of headers.
func (r Record) HeaderCount() int { return int(le.Uint32(r.b[r.e+36:])) }

// Header returns header j, 0 <= j < HeaderCount(); a nil value is null.
func (r Record) Header(j int) (key, value []byte) {
	if uint(j) >= uint(r.HeaderCount()) {
		panic(fmt.Sprintf("abi: header %d of %d", j, r.HeaderCount()))
	}
	h := r.hdrs + (int(le.Uint32(r.b[r.e+32:]))+j)*HeaderEntrySize
	off, n := le.Uint32(r.b[h:]), le.Uint32(r.b[h+4:])
	return r.b[off : off+n : off+n], span(r.b, h+8)
}

// HeaderValue returns the value of the first header named key.
func (r Record) HeaderValue(key string) (value []byte, ok bool) {
	n := r.HeaderCount()
	for j := 0; j < n; j++ {
		if k, v := r.Header(j); string(k) == key {
			return v, true
		}
	}
	return nil, false
}

// span reads an (offset u32, length i32) pair at b[at:]; length -1 is nil.
func span(b []byte, at int) []byte {
	off, n := le.Uint32(b[at:]), int32(le.Uint32(b[at+4:]))
	if n < 0 {
		return nil
	}
	end := off + uint32(n)
	return b[off:end:end]
}
