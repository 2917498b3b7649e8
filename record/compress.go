package record

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// The zstd encoder and decoder are created once per process and shared:
// creating a zstd encoder costs about 100 µs, far more than compressing a
// small batch. Both are safe for concurrent use through EncodeAll and
// DecodeAll, which keep their own internal pools of block coders. They are
// immutable after creation, so sharing them is not shared mutable state.
// s2 needs no pool: its block functions keep no state between calls.
var (
	sharedZstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderCRC(false), // the batch has its own CRC32C
		)
	})
	sharedZstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(BatchMaxSize),
			zstd.WithDecoderMaxWindow(BatchMaxSize),
			// Decode into the capacity the caller gives and no further: the
			// batch header says how large the records are, and a frame that
			// claims more is corrupt rather than a reason to allocate.
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderLowmem(true),
		)
	})
)

// compressRecords appends the compressed form of src to dst.
func compressRecords(dst, src []byte, c Compression) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionS2:
		need := s2.MaxEncodedLen(len(src))
		if need < 0 {
			return nil, fmt.Errorf("%w: %d bytes cannot be s2-compressed", ErrBatchTooLarge, len(src))
		}
		dst = growTo(dst, need)
		out := s2.Encode(dst[len(dst):len(dst)+need], src)
		return dst[:len(dst)+len(out)], nil
	case CompressionZstd:
		enc, err := sharedZstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("record: zstd encoder: %w", err)
		}
		return enc.EncodeAll(src, dst), nil
	}
	return nil, fmt.Errorf("record: unknown compression %d", c)
}

// decompressRecords decodes src, compressed with c, into dst[:0], which it
// grows to exactly n bytes at most once. It never allocates more than n
// bytes of output, whatever src claims, and fails unless the result is
// exactly n bytes long.
func decompressRecords(dst, src []byte, c Compression, n int) ([]byte, error) {
	if cap(dst) < n {
		dst = make([]byte, 0, n)
	}
	dst = dst[:0:n]
	var out []byte
	switch c {
	case CompressionS2:
		l, err := s2.DecodedLen(src)
		if err != nil || l != n {
			return dst, fmt.Errorf("%w: s2 records section (%d bytes declared, %d expected)", ErrCorruptBatch, l, n)
		}
		out, err = s2.Decode(dst[:n], src)
		if err != nil {
			return dst, fmt.Errorf("%w: s2: %v", ErrCorruptBatch, err)
		}
	case CompressionZstd:
		dec, err := sharedZstdDecoder()
		if err != nil {
			return dst, fmt.Errorf("record: zstd decoder: %w", err)
		}
		out, err = dec.DecodeAll(src, dst)
		if err != nil {
			return dst, fmt.Errorf("%w: zstd: %v", ErrCorruptBatch, err)
		}
	default:
		return dst, fmt.Errorf("%w: compression %d", ErrCorruptBatch, c)
	}
	if len(out) != n || (n > 0 && &out[0] != &dst[:1][0]) {
		return dst, fmt.Errorf("%w: records section decoded to %d bytes, header says %d", ErrCorruptBatch, len(out), n)
	}
	return out, nil
}

// growTo returns b with room for at least n more bytes.
func growTo(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}
