package record

import (
	"encoding/binary"
	"flag"
	"runtime"
	"testing"
)

const fuzzMaxBatch = 64 << 10

// decodeBounded runs it over data and checks what decoding allocated: the
// iterator's buffer never exceeds the maximum batch size, and, outside the
// fuzzing engine (whose own goroutines allocate concurrently and would make
// the process-wide figure noisy), the bytes allocated stay within that
// buffer, the header keys of the records, and slack for the decoders.
func decodeBounded(t *testing.T, it *RecordIterator, data []byte) {
	fuzzing := flag.Lookup("test.fuzz") != nil && flag.Lookup("test.fuzz").Value.String() != ""
	var before, after runtime.MemStats
	if !fuzzing {
		runtime.ReadMemStats(&before)
	}
	if err := it.Reset(data, fuzzMaxBatch); err == nil {
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
	}
	if cap(it.buf) > fuzzMaxBatch {
		t.Fatalf("decoding %d bytes grew the buffer to %d bytes", len(data), cap(it.buf))
	}
	if fuzzing {
		return
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2*fuzzMaxBatch+uint64(len(data))*2+256<<10 {
		t.Fatalf("decoding %d bytes allocated %d bytes", len(data), grew)
	}
}

func fuzzSeeds(f *testing.F) {
	var b BatchBuilder
	for i := 0; i < 20; i++ {
		b.Append(Record{Timestamp: int64(i), Key: []byte("k"), Value: []byte("a value that compresses well, well, well"),
			Headers: []Header{{Key: "h", Value: []byte("v")}}})
	}
	for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		batch, err := b.Build(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(batch)
	}
	f.Add(make([]byte, 200))
	f.Add([]byte("LDGB"))
}

// FuzzRecordIterator: arbitrary bytes never panic the decoder, and it never
// allocates much beyond the configured maximum batch size, whatever the
// header or the compressed stream claims.
func FuzzRecordIterator(f *testing.F) {
	fuzzSeeds(f)
	var it RecordIterator
	// Warm the shared decoders so their one-time set-up is not counted.
	for _, c := range []Compression{CompressionS2, CompressionZstd} {
		var b BatchBuilder
		b.Append(Record{Value: make([]byte, 100)})
		batch, _ := b.Build(c)
		_ = it.Reset(batch, fuzzMaxBatch)
	}
	f.Fuzz(func(t *testing.T, data []byte) { decodeBounded(t, &it, data) })
}

// FuzzBatchRecompressed feeds well-formed headers (valid CRCs) around
// arbitrary records sections, which exercises the codecs and the record
// decoder rather than the CRC check. The first 9 bytes of the input choose
// the compression, the declared uncompressed length and the record count.
func FuzzBatchRecompressed(f *testing.F) {
	f.Add([]byte("\x01\x00\x00\x01\x00\x03\x00\x00\x00\x01\x02\x03"))
	f.Add([]byte("\x02\x00\x00\x10\x00\x01\x00\x00\x00\x28\xb5\x2f\xfd\x00\x58"))
	var it RecordIterator
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 9 || len(in) > fuzzMaxBatch {
			return
		}
		le := binary.LittleEndian
		section := in[9:]
		count := le.Uint32(in[5:]) % 1000
		b := make([]byte, BatchHeaderSize+len(section))
		h := BatchHeader{Version: BatchVersion, Attributes: in[0] % 3, Length: uint32(len(b)),
			RecordCount: count + 1, LastOffsetDelta: count, UncompressedLen: le.Uint32(in[1:]) % (2 * fuzzMaxBatch)}
		if h.Attributes == 0 {
			h.UncompressedLen = uint32(len(section))
		}
		putBatchHeader(b, &h)
		copy(b[BatchHeaderSize:], section)
		le.PutUint32(b[12:], BatchChecksum(b))
		decodeBounded(t, &it, b)
	})
}
