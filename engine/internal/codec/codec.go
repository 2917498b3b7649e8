package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Castagnoli is the CRC32C table used by every checksum of the engine.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// EnvelopeSize is the size of the envelope header:
//
//	magic u32 | version u16 | kind u8 | reserved u8 | length u32 | crc u32
//
// length counts the whole value, header included, so it is never zero; the
// CRC covers the payload after the header.
const EnvelopeSize = 16

// Magic is the first four bytes of every enveloped value, "LDGM".
const Magic uint32 = 'L' | 'D'<<8 | 'G'<<16 | 'M'<<24

var (
	// ErrCorrupt: the bytes are not a well-formed envelope.
	ErrCorrupt = errors.New("corrupt")
	// ErrNewerVersion: the envelope's version is newer than the reader's.
	ErrNewerVersion = errors.New("written by a newer version")
)

// Seal appends an envelope of kind and version around payload to dst.
func Seal(dst []byte, kind uint8, version uint16, payload []byte) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, Magic)
	dst = le.AppendUint16(dst, version)
	dst = append(dst, kind, 0)
	dst = le.AppendUint32(dst, uint32(EnvelopeSize+len(payload)))
	dst = le.AppendUint32(dst, Checksum(payload))
	return append(dst, payload...)
}

// Open checks the envelope b of the expected kind and returns its payload
// and version. A version above maxVersion is ErrNewerVersion.
func Open(b []byte, kind uint8, maxVersion uint16) ([]byte, uint16, error) {
	le := binary.LittleEndian
	if len(b) < EnvelopeSize {
		return nil, 0, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	if m := le.Uint32(b); m != Magic {
		return nil, 0, fmt.Errorf("%w: bad magic %#08x", ErrCorrupt, m)
	}
	v := le.Uint16(b[4:])
	switch {
	case b[6] != kind:
		return nil, v, fmt.Errorf("%w: kind %d, want %d", ErrCorrupt, b[6], kind)
	case v == 0:
		return nil, v, fmt.Errorf("%w: version 0", ErrCorrupt)
	case v > maxVersion:
		return nil, v, fmt.Errorf("%w: version %d of kind %d (this build reads up to %d)", ErrNewerVersion, v, kind, maxVersion)
	case le.Uint32(b[8:]) != uint32(len(b)):
		return nil, v, fmt.Errorf("%w: length %d, have %d", ErrCorrupt, le.Uint32(b[8:]), len(b))
	}
	p := b[EnvelopeSize:]
	if c := Checksum(p); c != le.Uint32(b[12:]) {
		return nil, v, fmt.Errorf("%w: crc mismatch", ErrCorrupt)
	}
	return p, v, nil
}

// Length returns the total length an envelope header at the start of b
// declares, or 0 if b does not start with one.
func Length(b []byte) int {
	if len(b) < EnvelopeSize || binary.LittleEndian.Uint32(b) != Magic {
		return 0
	}
	return int(binary.LittleEndian.Uint32(b[8:]))
}

// Reader reads a payload; the first failure sticks and later reads return
// zero values, so a decoder checks Err once at the end.
type Reader struct {
	b   []byte
	err error
}

// NewReader returns a Reader over b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

func (r *Reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated %s", ErrCorrupt, what)
	}
	r.b = nil
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Bytes reads a uvarint length and that many bytes (aliasing the input).
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if n > uint64(len(r.b)) {
		r.fail("bytes")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.b) < 1 {
		r.fail("byte")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Fixed reads exactly n bytes.
func (r *Reader) Fixed(n int) []byte {
	if n > len(r.b) {
		r.fail("fixed bytes")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Count reads a uvarint element count whose elements take at least
// minSize bytes each, refusing counts the remaining bytes cannot hold.
func (r *Reader) Count(minSize int) int {
	n := r.Uvarint()
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(len(r.b)/minSize) {
		r.fail("count")
		return 0
	}
	return int(n)
}

// Err returns the first failure.
func (r *Reader) Err() error { return r.err }

// Done returns the first failure, or an error if bytes are left over.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(r.b))
	}
	return r.err
}

// AppendBytes appends a uvarint length and b.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}
