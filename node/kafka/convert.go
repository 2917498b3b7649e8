package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ledgemq/ledge/transport/wire"
)

// Kafka record batch v2 attributes.
const (
	kafkaCompressionMask = 0x07
	kafkaAppendTime      = 0x08
	kafkaTransactional   = 0x10
	kafkaControl         = 0x20
	// kafkaBatchHeader is the size of a v2 batch before its records.
	kafkaBatchHeader = 61
)

var (
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
	decompressor = kgo.DefaultDecompressor()
	// xerialPrefix starts a snappy section framed as the Java client
	// frames it (kgo's decompressor reads those).
	xerialPrefix = []byte{130, 83, 78, 65, 80, 80, 89, 0}
)

// converter turns produced Kafka batches into Ledge batches. A connection
// keeps one, so that its scratch (the decompressed records, a record's
// headers) is reused from batch to batch; it is not safe for concurrent
// use.
type converter struct {
	bb    wire.BatchBuilder
	plain []byte // a compressed batch's records, decompressed
	hdrs  []wire.Header
}

// toLedgeBatch converts the first Kafka v2 batch of b into a Ledge batch
// (uncompressed, the producer's id, epoch and sequence kept), and returns
// how many bytes of b it took. The Ledge batch is a new slice, built in
// one piece: records are copied once, from the Kafka batch (or its
// decompressed records) into it.
func (cv *converter) toLedgeBatch(b []byte) ([]byte, int, error) {
	if len(b) < kafkaBatchHeader {
		return nil, 0, errors.New("kafka: truncated record batch")
	}
	length := int(int32(binary.BigEndian.Uint32(b[8:])))
	n := 12 + length
	if length < kafkaBatchHeader-12 || n > len(b) {
		return nil, 0, errors.New("kafka: record batch length out of range")
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b[:n]); err != nil {
		return nil, 0, err
	}
	if kb.Magic != 2 {
		return nil, 0, fmt.Errorf("kafka: record batch magic %d (only v2 batches are accepted)", kb.Magic)
	}
	if crc32.Checksum(b[21:n], castagnoli) != uint32(kb.CRC) {
		return nil, 0, errors.New("kafka: record batch CRC mismatch")
	}
	if kb.Attributes&(kafkaTransactional|kafkaControl) != 0 {
		return nil, 0, errors.New("kafka: transactional batches are not served")
	}
	if kb.NumRecords <= 0 {
		return nil, 0, errors.New("kafka: empty record batch")
	}
	records, err := cv.decompress(kb.Records, kgo.CompressionCodecType(kb.Attributes&kafkaCompressionMask))
	if err != nil {
		return nil, 0, fmt.Errorf("kafka: decompressing a record batch: %w", err)
	}
	// A Ledge record is never more than 16 bytes longer than its Kafka
	// form (its timestamp and offset deltas may be longer varints; it
	// has no attributes byte): build in a slice that fits them all.
	cv.bb.ResetInPlace(make([]byte, 0, wire.BatchHeaderSize+len(records)+16*int(kb.NumRecords)))
	if kb.ProducerID >= 0 {
		cv.bb.SetProducer(uint64(kb.ProducerID), uint32(max(kb.ProducerEpoch, 0)), kb.FirstSequence)
	}
	for i := int32(0); i < kb.NumRecords; i++ {
		var r wire.Record
		var err error
		if r, records, err = cv.nextRecord(records, kb.FirstTimestamp); err != nil {
			cv.bb.Reset()
			return nil, 0, fmt.Errorf("kafka: record %d: %w", i, err)
		}
		cv.bb.Append(r)
	}
	out, err := cv.bb.FinishInPlace(wire.CompressionNone)
	if err != nil {
		return nil, 0, err
	}
	return out, n, nil
}

// decompress returns the records section uncompressed. A raw snappy
// block (franz-go's and librdkafka's default) is decoded into the
// converter's scratch; other codecs into a new slice.
func (cv *converter) decompress(records []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	switch {
	case codec == kgo.CodecNone:
		return records, nil
	case codec == kgo.CodecSnappy && !bytes.HasPrefix(records, xerialPrefix):
		l, err := s2.DecodedLen(records)
		if err != nil {
			return nil, err
		}
		if l > wire.BatchMaxSize {
			return nil, fmt.Errorf("%w: %d bytes of records", wire.ErrBatchTooLarge, l)
		}
		if cap(cv.plain) < l {
			cv.plain = make([]byte, l)
		}
		return s2.Decode(cv.plain[:cap(cv.plain)], records)
	}
	return decompressor.Decompress(records, codec)
}

// nextRecord parses the first Kafka record of b: a varint length, an
// attributes byte, varint timestamp and offset deltas, a key and a value
// (varint length, -1 for null), a varint header count and the headers
// (a key and a value each). Key, value and header values refer to b.
func (cv *converter) nextRecord(b []byte, firstTimestamp int64) (wire.Record, []byte, error) {
	var r wire.Record
	l, k := binary.Varint(b)
	if k <= 0 || l < 1 || int64(len(b)-k) < l {
		return r, nil, errors.New("truncated record")
	}
	rest := b[k+int(l):]
	p := recordParser{b: b[k+1 : k+int(l)]} // past the attributes byte
	tsDelta := p.varint()
	p.varint() // the offset delta: Ledge numbers records consecutively
	r.Timestamp = firstTimestamp + tsDelta
	r.Key = p.nullable()
	r.Value = p.nullable()
	count := p.varint()
	if count < 0 || count > int64(len(p.b)) {
		return r, nil, errors.New("header count out of range")
	}
	cv.hdrs = cv.hdrs[:0]
	for range count {
		key := p.nullable()
		cv.hdrs = append(cv.hdrs, wire.Header{Key: string(key), Value: p.nullable()})
	}
	if p.err != nil || len(p.b) != 0 {
		return r, nil, errors.New("malformed record")
	}
	if count > 0 {
		r.Headers = cv.hdrs
	}
	return r, rest, nil
}

// recordParser reads the fields of one Kafka record; a field that runs
// past the record sets err and leaves the rest empty.
type recordParser struct {
	b   []byte
	err error
}

func (p *recordParser) varint() int64 {
	v, k := binary.Varint(p.b)
	if k <= 0 {
		p.fail()
		return 0
	}
	p.b = p.b[k:]
	return v
}

// nullable reads a varint length and that many bytes, -1 being null.
func (p *recordParser) nullable() []byte {
	l := p.varint()
	switch {
	case p.err != nil:
		return nil
	case l == -1:
		return nil
	case l < 0 || l > int64(len(p.b)):
		p.fail()
		return nil
	}
	v := p.b[:l:l]
	p.b = p.b[l:]
	return v
}

func (p *recordParser) fail() {
	if p.err == nil {
		p.err = errors.New("malformed record")
	}
	p.b = nil
}
