package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/ledgemq/ledge/record"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaRecords encodes records as a v2 batch's records section.
func kafkaRecords(recs []kmsg.Record) []byte {
	var out []byte
	for i := range recs {
		body := recs[i].AppendTo(nil)[1:] // AppendTo starts with the (zero) length
		out = kbin.AppendVarint(out, int32(len(body)))
		out = append(out, body...)
	}
	return out
}

func sealBatch(b kmsg.RecordBatch) []byte {
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

// TestBatchRoundTrip: a Kafka batch, uncompressed or compressed with any
// of Kafka's codecs, becomes a Ledge batch the engine would accept,
// compressed if it was (zstd as zstd, the others as S2), and back a Kafka
// batch with the same records, the producer's identity, and the history
// epoch as its leader epoch.
func TestBatchRoundTrip(t *testing.T) {
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, c := range codecs {
		t.Run(name, func(t *testing.T) { testBatchRoundTrip(t, c) })
	}
}

func testBatchRoundTrip(t *testing.T, c kgo.CompressionCodec) {
	recs := []kmsg.Record{
		{TimestampDelta64: 0, OffsetDelta: 0, Key: []byte("k1"), Value: bytes.Repeat([]byte("v1"), 100),
			Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}, {Key: "null"}}},
		{TimestampDelta64: 7, OffsetDelta: 1, Key: nil, Value: []byte("v2")},
		{TimestampDelta64: 9, OffsetDelta: 2, Key: []byte{}, Value: nil},
	}
	comp, err := kgo.DefaultCompressor(c)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	packed, codec := kafkaRecords(recs), kgo.CodecNone
	if comp != nil {
		packed, codec = comp.Compress(&buf, packed)
		if codec == kgo.CodecNone {
			t.Fatal("the batch was sent uncompressed")
		}
	}
	in := sealBatch(kmsg.RecordBatch{
		Magic: 2, Attributes: int16(codec), LastOffsetDelta: 2, FirstTimestamp: 1000, MaxTimestamp: 1009,
		ProducerID: 42, ProducerEpoch: 3, FirstSequence: 5, NumRecords: 3, Records: packed,
	})

	ledge, n, err := new(converter).toLedgeBatch(append(in, 0xff)) // a byte of the next batch
	if err != nil {
		t.Fatal(err)
	}
	if n != len(in) {
		t.Fatalf("took %d bytes, want the batch's %d", n, len(in))
	}
	h, err := record.VerifyBatch(ledge, record.BatchMaxSize)
	if err != nil {
		t.Fatal(err)
	}
	if h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != 5 || h.RecordCount != 3 {
		t.Fatalf("Ledge batch header %+v lost the producer's identity", h)
	}
	if want := ledgeCodec(codec); h.Compression() != want {
		t.Fatalf("a %v batch stored as %v, want %v", codec, h.Compression(), want)
	}
	record.StampBaseOffset(ledge, 100)

	out := appendKafkaBatches(nil, ledge, 7)
	var back kmsg.RecordBatch
	if err := back.ReadFrom(out); err != nil {
		t.Fatal(err)
	}
	if crc32.Checksum(out[21:], castagnoli) != uint32(back.CRC) {
		t.Fatal("the fetched batch's CRC does not match")
	}
	if back.FirstOffset != 100 || back.PartitionLeaderEpoch != 7 || back.ProducerID != 42 || back.ProducerEpoch != 3 ||
		back.FirstSequence != 5 || back.NumRecords != 3 || back.FirstTimestamp != 1000 || back.MaxTimestamp != 1009 {
		t.Fatalf("fetched batch header %+v", back)
	}
	rest := back.Records
	for i, want := range recs {
		l, k := binary.Varint(rest)
		var got kmsg.Record
		if err := got.ReadFrom(rest[:k+int(l)]); err != nil {
			t.Fatal(err)
		}
		rest = rest[k+int(l):]
		if got.OffsetDelta != want.OffsetDelta || got.TimestampDelta64 != want.TimestampDelta64 ||
			!bytes.Equal(got.Key, want.Key) || (got.Key == nil) != (want.Key == nil) ||
			!bytes.Equal(got.Value, want.Value) || (got.Value == nil) != (want.Value == nil) ||
			!slices.EqualFunc(got.Headers, want.Headers, func(a, b kmsg.Header) bool {
				return a.Key == b.Key && bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil)
			}) {
			t.Errorf("record %d came back as %+v, want %+v", i, got, want)
		}
	}
}

// TestCorruptBatchRefused: a batch whose CRC does not match, of an
// older magic, or whose record is cut short, is refused before anything
// is appended.
func TestCorruptBatchRefused(t *testing.T) {
	b := sealBatch(kmsg.RecordBatch{Magic: 2, NumRecords: 1, ProducerID: -1,
		Records: kafkaRecords([]kmsg.Record{{Value: []byte("v")}})})
	b[len(b)-1] ^= 1
	if _, _, err := new(converter).toLedgeBatch(b); err == nil {
		t.Fatal("a batch with a bad CRC was accepted")
	}
	old := sealBatch(kmsg.RecordBatch{Magic: 1, NumRecords: 1, ProducerID: -1,
		Records: kafkaRecords([]kmsg.Record{{Value: []byte("v")}})})
	if _, _, err := new(converter).toLedgeBatch(old); err == nil {
		t.Fatal("a magic 1 batch was accepted")
	}
	recs := kafkaRecords([]kmsg.Record{{Value: []byte("v"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}}})
	for cut := 1; cut < len(recs); cut++ {
		short := sealBatch(kmsg.RecordBatch{Magic: 2, NumRecords: 1, ProducerID: -1, Records: recs[:len(recs)-cut]})
		if _, _, err := new(converter).toLedgeBatch(short); err == nil {
			t.Fatalf("a batch whose record lacks its last %d bytes (the CRC right) was accepted", cut)
		}
	}
}

// TestXerialSnappy: a snappy section framed as the Java client frames it
// (a header, then blocks each with its length) is read like a raw one.
func TestXerialSnappy(t *testing.T) {
	recs := []kmsg.Record{{Value: bytes.Repeat([]byte("x"), 300)}, {OffsetDelta: 1, Value: []byte("y")}}
	plain := kafkaRecords(recs)
	framed := append([]byte{}, xerialPrefix...)
	framed = append(framed, 0, 0, 0, 1, 0, 0, 0, 1)
	for _, chunk := range [][]byte{plain[:100], plain[100:]} {
		block := s2.EncodeSnappy(nil, chunk)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(block)))
		framed = append(framed, block...)
	}
	in := sealBatch(kmsg.RecordBatch{Magic: 2, Attributes: int16(kgo.CodecSnappy), LastOffsetDelta: 1, NumRecords: 2, ProducerID: -1, Records: framed})
	ledge, _, err := new(converter).toLedgeBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	it, err := record.NewRecordIterator(ledge, record.BatchMaxSize)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range recs {
		r, ok := it.Next()
		if !ok || !bytes.Equal(r.Value, want.Value) {
			t.Fatalf("record %d: %q, want %q (%v)", i, r.Value, want.Value, it.Err())
		}
	}
}

// TestDecompressionBounded: a compressed section that decompresses to more
// than a Ledge batch may hold is refused, whatever the codec, without
// decompressing it all.
func TestDecompressionBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 64 MiB four times (half a minute under the race detector)")
	}
	huge := make([]byte, record.BatchMaxSize+1)
	for _, c := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		comp, err := kgo.DefaultCompressor(c)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		packed, codec := comp.Compress(&buf, huge)
		in := sealBatch(kmsg.RecordBatch{Magic: 2, Attributes: int16(codec), NumRecords: 1, ProducerID: -1, Records: packed})
		if _, _, err := new(converter).toLedgeBatch(in); !errors.Is(err, record.ErrBatchTooLarge) {
			t.Errorf("%v: %d compressed bytes of %d: %v, want refused as too large", codec, len(packed), len(huge), err)
		}
	}
}
