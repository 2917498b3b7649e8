package record

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func testRecords(rng *rand.Rand, n int) []Record {
	recs := make([]Record, n)
	ts := int64(1_700_000_000_000)
	for i := range recs {
		r := Record{Timestamp: ts + rng.Int64N(2000) - 1000}
		if rng.IntN(4) != 0 {
			r.Key = []byte(fmt.Sprintf("key-%d", rng.IntN(100)))
		}
		switch rng.IntN(5) {
		case 0: // null value
		case 1:
			r.Value = []byte{}
		default:
			r.Value = bytes.Repeat([]byte{byte('a' + i%26)}, rng.IntN(3000))
		}
		for h := rng.IntN(3); h > 0; h-- {
			var v []byte
			if rng.IntN(3) != 0 {
				v = []byte(fmt.Sprintf("v%d", h))
			}
			r.Headers = append(r.Headers, Header{Key: fmt.Sprintf("h%d", h), Value: v})
		}
		recs[i] = r
	}
	return recs
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func checkRecords(t *testing.T, batch []byte, want []Record, base uint64, withOffsets bool) {
	t.Helper()
	it, err := NewRecordIterator(batch, 0)
	if err != nil {
		t.Fatalf("iterator: %v", err)
	}
	i := 0
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		w := want[i]
		off := base + uint64(i)
		if withOffsets {
			off = w.Offset
		}
		if r.Offset != off || r.Timestamp != w.Timestamp || !sameBytes(r.Key, w.Key) || !sameBytes(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got off=%d ts=%d key=%q val=%d bytes headers=%d; want off=%d ts=%d key=%q val=%d bytes headers=%d",
				i, r.Offset, r.Timestamp, r.Key, len(r.Value), len(r.Headers), off, w.Timestamp, w.Key, len(w.Value), len(w.Headers))
		}
		for j, h := range r.Headers {
			if h.Key != w.Headers[j].Key || !sameBytes(h.Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d: got %q=%q want %q=%q", i, j, h.Key, h.Value, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
		i++
	}
	if it.Err() != nil {
		t.Fatalf("iterating: %v", it.Err())
	}
	if i != len(want) {
		t.Fatalf("got %d records, want %d", i, len(want))
	}
}

func TestBatchRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		for _, n := range []int{1, 2, 17, 300} {
			t.Run(fmt.Sprintf("%s/%d", c, n), func(t *testing.T) {
				recs := testRecords(rng, n)
				var b BatchBuilder
				b.SetProducer(42, 3, 7)
				for _, r := range recs {
					b.Append(r)
				}
				batch, err := b.Build(c)
				if err != nil {
					t.Fatal(err)
				}
				h, err := VerifyBatch(batch, 0)
				if err != nil {
					t.Fatal(err)
				}
				if h.RecordCount != uint32(n) || h.LastOffsetDelta != uint32(n-1) || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != 7 {
					t.Fatalf("header %+v", h)
				}
				StampBaseOffset(batch, 1000)
				checkRecords(t, batch, recs, 1000, false)

				// Stamping append time keeps the batch valid and gives every
				// record the stamped time.
				StampAppendTime(batch, 5)
				it, err := NewRecordIterator(batch, 0)
				if err != nil {
					t.Fatal(err)
				}
				for r, ok := it.Next(); ok; r, ok = it.Next() {
					if r.Timestamp != 5 {
						t.Fatalf("append time: got %d", r.Timestamp)
					}
				}
				if it.Err() != nil {
					t.Fatal(it.Err())
				}
			})
		}
	}
}

func TestBatchWithOffsetsKeepsGaps(t *testing.T) {
	recs := testRecords(rand.New(rand.NewPCG(3, 4)), 5)
	for i := range recs {
		recs[i].Offset = 100 + uint64(i*i)
	}
	var b BatchBuilder
	for _, r := range recs {
		b.AppendWithOffset(r)
	}
	batch, err := b.Build(CompressionZstd)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseBatchHeader(batch)
	if h.BaseOffset != 100 || h.LastOffset() != 116 || h.RecordCount != 5 {
		t.Fatalf("header %+v", h)
	}
	checkRecords(t, batch, recs, 0, true)

	b.Reset()
	b.AppendWithOffset(Record{Offset: 10})
	b.AppendWithOffset(Record{Offset: 10})
	if _, err := b.Build(CompressionNone); err == nil {
		t.Fatal("a repeated offset was accepted")
	}
}

func TestVerifyBatchRejects(t *testing.T) {
	var b BatchBuilder
	b.Append(Record{Value: []byte("hello")})
	good, err := b.Build(CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := []struct {
		name  string
		batch []byte
		max   int
		want  error
	}{
		{"zeros", make([]byte, len(good)), 0, ErrCorruptBatch},
		{"short", good[:10], 0, ErrCorruptBatch},
		{"truncated", good[:len(good)-1], 0, ErrCorruptBatch},
		{"crc", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), 0, ErrCorruptBatch},
		{"version", mutate(func(b []byte) []byte { b[4] = 2; return b }), 0, ErrUnsupportedVersion},
		{"attributes", mutate(func(b []byte) []byte { b[5] = 0x40; return b }), 0, ErrCorruptBatch},
		{"too large", good, 50, ErrBatchTooLarge},
		{"zero count", mutate(func(b []byte) []byte { b[28] = 0; return b }), 0, ErrCorruptBatch},
	}
	for _, c := range cases {
		if _, err := VerifyBatch(c.batch, c.max); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// The base offset is outside the CRC.
	stamped := bytes.Clone(good)
	StampBaseOffset(stamped, 1<<40)
	if _, err := VerifyBatch(stamped, 0); err != nil {
		t.Fatalf("stamped: %v", err)
	}
}

func TestZeroRegionIsNeverABatch(t *testing.T) {
	for _, n := range []int{0, 1, BatchHeaderSize - 1, BatchHeaderSize, 4096, 1 << 16} {
		z := make([]byte, n)
		if _, err := ParseBatchHeader(z); !errors.Is(err, ErrCorruptBatch) {
			t.Fatalf("%d zero bytes: %v", n, err)
		}
		if _, err := NewRecordIterator(z, 0); err == nil {
			t.Fatalf("%d zero bytes made an iterator", n)
		}
	}
}

func TestIncompressibleStaysPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	v := make([]byte, 2000)
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	var b BatchBuilder
	b.Append(Record{Value: v})
	batch, err := b.Build(CompressionS2)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := VerifyBatch(batch, 0)
	if h.Compression() != CompressionNone {
		t.Fatalf("incompressible records stored as %s", h.Compression())
	}
}

func BenchmarkBatchIterate(b *testing.B) {
	for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		b.Run(c.String(), func(b *testing.B) {
			var bb BatchBuilder
			v := bytes.Repeat([]byte("0123456789abcdef"), 64)
			for i := 0; i < 100; i++ {
				bb.Append(Record{Timestamp: int64(i), Value: v})
			}
			batch, err := bb.Build(c)
			if err != nil {
				b.Fatal(err)
			}
			var it RecordIterator
			b.SetBytes(int64(100 * len(v)))
			b.ReportAllocs()
			for b.Loop() {
				if err := it.Reset(batch, 0); err != nil {
					b.Fatal(err)
				}
				for _, ok := it.Next(); ok; _, ok = it.Next() {
				}
			}
		})
	}
}

// A value appended in parts is the record with the parts joined; no parts
// is an empty value, not a null one.
func TestAppendParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	recs := testRecords(rng, 50)
	recs = append(recs, Record{Timestamp: 9, Value: []byte{}})
	var whole, parted BatchBuilder
	for _, r := range recs {
		whole.Append(r)
		if r.Value == nil {
			parted.Append(r)
			continue
		}
		cut := len(r.Value) / 3
		in := r
		in.Value = []byte("ignored")
		parted.AppendParts(in, [][]byte{r.Value[:cut], nil, r.Value[cut:]})
	}
	parted.AppendParts(Record{Timestamp: 10, Value: []byte("ignored")}, nil)
	whole.Append(Record{Timestamp: 10, Value: []byte{}})
	a, err := whole.Build(CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	b, err := parted.Build(CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("a batch built from parts differs from the one built whole")
	}
}
