package abi

import "math"

// Meta describes the poll an input region comes from.
type Meta struct {
	Topic     string
	Partition int32
	// From is the position the poll read from.
	From uint64
	// Next is the position after this result: where the consumer's next
	// poll starts, past any record a filter drops.
	Next uint64
}

// Encoder lays records out in the input region format. The zero value is
// ready to use; Reset makes it reusable without reallocating.
//
// Records are added in offset order with Add; AddHeader attaches a header
// to the record added last. AppendRegion then writes the region. The
// encoder refers to the keys, values and header names and values it is
// given rather than copying them: they are copied once, into the region,
// and must stay unchanged until AppendRegion returns.
type Encoder struct {
	meta    Meta
	recs    []byte  // record entries; spans relative to the data section
	hdrs    []byte  // header entries; spans relative to the data section
	data    []piece // the data section's pieces, in order
	dataLen int
	count   int
	nh      int
}

// piece is one piece of the data section: bytes or a string.
type piece struct {
	b []byte
	s string
}

// Reset empties the encoder for a region described by m, keeping its
// buffers.
func (e *Encoder) Reset(m Meta) {
	clear(e.data) // let go of the previous region's records
	*e = Encoder{meta: m, recs: e.recs[:0], hdrs: e.hdrs[:0], data: e.data[:0]}
	e.addString(m.Topic)
}

func (e *Encoder) addString(s string) {
	e.data = append(e.data, piece{s: s})
	e.dataLen += len(s)
}

// Grow reserves room for records more records, so that adding them does
// not reallocate.
func (e *Encoder) Grow(records int) {
	e.recs = growCap(e.recs, records*RecordEntrySize)
	e.data = growCap(e.data, 2*records)
}

func growCap[T any](b []T, n int) []T {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]T, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// SetMeta replaces the description given to Reset; the topic name must be
// the same.
func (e *Encoder) SetMeta(m Meta) {
	if m.Topic != e.meta.Topic {
		panic("abi: SetMeta changes the topic")
	}
	e.meta = m
}

// Len returns the number of records added.
func (e *Encoder) Len() int { return e.count }

// Size returns the size of the region AppendRegion would write.
func (e *Encoder) Size() int {
	return align8(e.dataOff()+e.dataLen) + answerCap(e.count)
}

func (e *Encoder) dataOff() int { return HeaderSize + len(e.recs) + len(e.hdrs) }

// Add appends a record. A nil key or value is null; an empty non-nil one
// is empty. key and value are copied by AppendRegion, not before.
func (e *Encoder) Add(offset uint64, timestamp int64, key, value []byte) {
	var ent [RecordEntrySize]byte
	le.PutUint64(ent[0:], offset)
	le.PutUint64(ent[8:], uint64(timestamp))
	e.putSpan(ent[16:], key)
	e.putSpan(ent[24:], value)
	le.PutUint32(ent[32:], uint32(e.nh))
	e.recs = append(e.recs, ent[:]...)
	e.count++
}

// AddHeader appends a header to the record added last.
func (e *Encoder) AddHeader(key string, value []byte) {
	if e.count == 0 {
		panic("abi: AddHeader before Add")
	}
	var ent [HeaderEntrySize]byte
	le.PutUint32(ent[0:], uint32(e.dataLen))
	le.PutUint32(ent[4:], uint32(len(key)))
	e.addString(key)
	e.putSpan(ent[8:], value)
	e.hdrs = append(e.hdrs, ent[:]...)
	e.nh++
	last := e.recs[len(e.recs)-RecordEntrySize:]
	le.PutUint32(last[36:], le.Uint32(last[36:])+1)
}

// putSpan writes the (offset, length) of v, adding its bytes to the data
// section; the offset is relative to the data section until AppendRegion
// fixes it up.
func (e *Encoder) putSpan(b []byte, v []byte) {
	if v == nil {
		le.PutUint32(b[0:], 0)
		le.PutUint32(b[4:], math.MaxUint32) // -1: null
		return
	}
	le.PutUint32(b[0:], uint32(e.dataLen))
	le.PutUint32(b[4:], uint32(len(v)))
	if len(v) > 0 {
		e.data = append(e.data, piece{b: v})
		e.dataLen += len(v)
	}
}

// AppendRegion appends the input region to dst and returns the extended
// slice. The region's answer area is zeroed. The caller checks Size
// against its limits first: a region is at most 4 GiB by construction of
// its 32-bit offsets.
func (e *Encoder) AppendRegion(dst []byte) []byte {
	dataOff := e.dataOff()
	answerOff := align8(dataOff + e.dataLen)
	size := answerOff + answerCap(e.count)
	start := len(dst)
	dst = grow(dst, size)
	r := dst[start : start+size]

	le.PutUint32(r[offMagic:], InputMagic)
	le.PutUint32(r[offVersion:], Version)
	le.PutUint32(r[offSize:], uint32(size))
	le.PutUint32(r[offCount:], uint32(e.count))
	le.PutUint64(r[offFrom:], e.meta.From)
	le.PutUint64(r[offNext:], e.meta.Next)
	le.PutUint32(r[offPartition:], uint32(e.meta.Partition))
	le.PutUint32(r[offTopicOff:], uint32(dataOff))
	le.PutUint32(r[offTopicLen:], uint32(len(e.meta.Topic)))
	le.PutUint32(r[offRecordsOff:], HeaderSize)
	le.PutUint32(r[offHeadersOff:], uint32(HeaderSize+len(e.recs)))
	le.PutUint32(r[offHeaderCount:], uint32(e.nh))
	le.PutUint32(r[offAnswerOff:], uint32(answerOff))
	le.PutUint32(r[offAnswerCap:], uint32(size-answerOff))

	recs := r[HeaderSize : HeaderSize+len(e.recs)]
	copy(recs, e.recs)
	for i := 0; i < len(recs); i += RecordEntrySize {
		fixSpan(recs[i+16:], dataOff)
		fixSpan(recs[i+24:], dataOff)
	}
	hdrs := r[HeaderSize+len(e.recs) : dataOff]
	copy(hdrs, e.hdrs)
	for i := 0; i < len(hdrs); i += HeaderEntrySize {
		le.PutUint32(hdrs[i:], le.Uint32(hdrs[i:])+uint32(dataOff))
		fixSpan(hdrs[i+8:], dataOff)
	}
	at := dataOff
	for _, p := range e.data {
		if p.b != nil {
			at += copy(r[at:], p.b)
		} else {
			at += copy(r[at:], p.s)
		}
	}
	clear(r[at:])
	return dst
}

func fixSpan(b []byte, dataOff int) {
	if int32(le.Uint32(b[4:])) >= 0 {
		le.PutUint32(b, le.Uint32(b)+uint32(dataOff))
	}
}

// grow extends b by n bytes, reallocating at most once.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}
