package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ledgemq/ledge/record"
)

// Kafka record batch v2 attributes.
const (
	kafkaCompressionMask = 0x07
	kafkaAppendTime      = 0x08
	kafkaTransactional   = 0x10
	kafkaControl         = 0x20
	// kafkaBatchHeader is the size of a v2 batch before its records.
	kafkaBatchHeader = 61
	// minKafkaRecord is the smallest a v2 record can be: a length, an
	// attributes byte, timestamp and offset deltas, a key and a value
	// length and a header count, a byte each.
	minKafkaRecord = 7
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	// xerialPrefix starts a snappy section framed as the Java client
	// frames it: a 16-byte header, then blocks, each a big-endian length
	// and a raw snappy block.
	xerialPrefix = []byte{130, 83, 78, 65, 80, 80, 89, 0}
	// zstdDecoder is created once and shared (DecodeAll is safe for
	// concurrent use); it refuses to decode more than a batch may hold.
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(record.BatchMaxSize))
	})
)

// converter turns produced Kafka batches into Ledge batches. A connection
// keeps one, so that its scratch (the decompressed records, a record's
// headers) is reused from batch to batch; it is not safe for concurrent
// use.
type converter struct {
	bb    record.BatchBuilder
	plain []byte // a compressed batch's records, decompressed
	hdrs  []record.Header
	gzip  *gzip.Reader
	lz4   *lz4.Reader
}

// toLedgeBatch converts the first Kafka v2 batch of b into a Ledge batch
// (the producer's id, epoch and sequence kept), and returns how many
// bytes of b it took. The Ledge batch is a new slice, built in one piece:
// records are copied once, from the Kafka batch (or its decompressed
// records) into it. A compressed Kafka batch stays compressed, with
// Ledge's codec nearest the producer's (ledgeCodec).
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
	codec := kgo.CompressionCodecType(kb.Attributes & kafkaCompressionMask)
	records, err := cv.decompress(kb.Records, codec)
	if err != nil {
		return nil, 0, fmt.Errorf("kafka: decompressing a record batch: %w", err)
	}
	// The count is the producer's claim; the records' bytes are what
	// arrived. Nothing is sized from a count they cannot hold.
	if int64(kb.NumRecords) > int64(len(records)/minKafkaRecord) {
		return nil, 0, fmt.Errorf("kafka: record batch claims %d records in %d bytes", kb.NumRecords, len(records))
	}
	// A Ledge record is never more than 16 bytes longer than its Kafka
	// form (its timestamp and offset deltas may be longer varints; it
	// has no attributes byte): build in a slice that fits them all.
	cv.bb.ResetInPlace(make([]byte, 0, record.BatchHeaderSize+len(records)+16*int(kb.NumRecords)))
	if kb.ProducerID >= 0 {
		cv.bb.SetProducer(uint64(kb.ProducerID), uint32(max(kb.ProducerEpoch, 0)), kb.FirstSequence)
	}
	for i := int32(0); i < kb.NumRecords; i++ {
		var r record.Record
		var err error
		if r, records, err = cv.nextRecord(records, kb.FirstTimestamp); err != nil {
			cv.bb.Reset()
			return nil, 0, fmt.Errorf("kafka: record %d: %w", i, err)
		}
		cv.bb.Append(r)
	}
	out, err := cv.bb.FinishInPlace(ledgeCodec(codec))
	if len(records) > maxReusedBody {
		// Scratch that large is not kept for the connection's next batch.
		cv.plain, cv.bb = nil, record.BatchBuilder{}
	}
	if err != nil {
		return nil, 0, err
	}
	if cap(out) > 2*len(out) {
		// Compressed: the batch may be kept (cached, parked polls), so it
		// does not hold on to the room its records took uncompressed.
		out = bytes.Clone(out)
	}
	return out, n, nil
}

// ledgeCodec is the codec a Kafka batch compressed with codec is stored
// with: zstd as zstd, gzip, snappy and lz4 as S2 (Ledge's fast codec,
// snappy's successor), none as none. The producer asked for its records
// to be compressed; the node keeps them so, on disk and to SDK consumers.
func ledgeCodec(codec kgo.CompressionCodecType) record.Compression {
	switch codec {
	case kgo.CodecNone:
		return record.CompressionNone
	case kgo.CodecZstd:
		return record.CompressionZstd
	}
	return record.CompressionS2
}

// decompress returns the records section uncompressed, in the
// converter's scratch, refusing more than a Ledge batch may hold
// (record.BatchMaxSize) whatever the compressed section claims.
func (cv *converter) decompress(records []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	switch codec {
	case kgo.CodecNone:
		return records, nil
	case kgo.CodecSnappy:
		if bytes.HasPrefix(records, xerialPrefix) {
			return cv.xerial(records)
		}
		return cv.snappy(cv.plain[:0], records)
	case kgo.CodecZstd:
		d, err := zstdDecoder()
		if err != nil {
			return nil, err
		}
		out, err := d.DecodeAll(records, cv.plain[:0])
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, fmt.Errorf("%w: %w", record.ErrBatchTooLarge, err)
		}
		if err != nil {
			return nil, err
		}
		cv.plain = out
		return out, nil
	case kgo.CodecGzip:
		var err error
		if cv.gzip == nil {
			cv.gzip, err = gzip.NewReader(bytes.NewReader(records))
		} else {
			err = cv.gzip.Reset(bytes.NewReader(records))
		}
		if err != nil {
			return nil, err
		}
		return cv.readAll(cv.gzip)
	case kgo.CodecLz4:
		if cv.lz4 == nil {
			cv.lz4 = lz4.NewReader(nil)
		}
		cv.lz4.Reset(bytes.NewReader(records))
		return cv.readAll(cv.lz4)
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// snappy appends the raw snappy block src, decoded, to dst.
func (cv *converter) snappy(dst, src []byte) ([]byte, error) {
	l, err := s2.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if len(dst)+l > record.BatchMaxSize {
		return nil, fmt.Errorf("%w: over %d bytes of records", record.ErrBatchTooLarge, record.BatchMaxSize)
	}
	if cap(dst)-len(dst) < l {
		dst = append(dst, make([]byte, l)...)[:len(dst)]
	}
	if _, err := s2.Decode(dst[len(dst):len(dst)+l], src); err != nil {
		return nil, err
	}
	cv.plain = dst[:len(dst)+l]
	return cv.plain, nil
}

// xerial decodes a snappy section in the Java client's framing.
func (cv *converter) xerial(src []byte) ([]byte, error) {
	if len(src) < 16 {
		return nil, errors.New("truncated xerial header")
	}
	src = src[16:]
	out := cv.plain[:0]
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errors.New("truncated xerial block")
		}
		n := int(binary.BigEndian.Uint32(src))
		if n > len(src)-4 {
			return nil, errors.New("xerial block length out of range")
		}
		var err error
		if out, err = cv.snappy(out, src[4:4+n]); err != nil {
			return nil, err
		}
		src = src[4+n:]
	}
	return out, nil
}

// readAll reads r into the converter's scratch.
func (cv *converter) readAll(r io.Reader) ([]byte, error) {
	buf := bytes.NewBuffer(cv.plain[:0])
	n, err := buf.ReadFrom(io.LimitReader(r, record.BatchMaxSize+1))
	if err != nil {
		return nil, err
	}
	if n > record.BatchMaxSize {
		return nil, fmt.Errorf("%w: over %d bytes of records", record.ErrBatchTooLarge, record.BatchMaxSize)
	}
	cv.plain = buf.Bytes()
	return cv.plain, nil
}

// nextRecord parses the first Kafka record of b: a varint length, an
// attributes byte, varint timestamp and offset deltas, a key and a value
// (varint length, -1 for null), a varint header count and the headers
// (a key and a value each). Key, value and header values refer to b.
func (cv *converter) nextRecord(b []byte, firstTimestamp int64) (record.Record, []byte, error) {
	var r record.Record
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
		cv.hdrs = append(cv.hdrs, record.Header{Key: string(key), Value: p.nullable()})
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
