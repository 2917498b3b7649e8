package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits every encoder and decoder of this package enforces. A decoder
// checks each length and count against the limit and against the bytes
// left in the body before it allocates anything for it.
const (
	// MaxNameLen bounds every name: topic, consumer, group, member,
	// producer, token id and label, filter and parameter keys.
	MaxNameLen = 255
	// MaxTextLen bounds a human message in a reply. Encoders cut longer
	// messages (at a UTF-8 boundary) rather than fail.
	MaxTextLen = 4096
	// MaxParamValueLen bounds a filter parameter's value.
	MaxParamValueLen = 4096
	// MaxFilterParams bounds the parameters of one filter.
	MaxFilterParams = 64
	// MaxPollKeyLen bounds the key (or key prefix) a poll names.
	MaxPollKeyLen = 1024
	// MaxFenceTokenLen bounds a fence token. Tokens are opaque to clients:
	// they hand back exactly the bytes a reply gave them.
	MaxFenceTokenLen = 512
	// MaxAuthTokenLen bounds a bearer token (Authenticate, CreateToken).
	MaxAuthTokenLen = 1024
	// MaxListLen bounds the entries of any list in a message (partitions
	// of a poll, topics of a listing, ...).
	MaxListLen = 1 << 16
)

// fieldReader decodes a body front to back. The first error sticks: later
// reads return zero values, so a decoder reads straight through and checks
// once at the end.
type fieldReader struct {
	b    []byte
	off  int
	err  error
	what string
}

func newFieldReader(b []byte, what string) fieldReader { return fieldReader{b: b, what: what} }

func (r *fieldReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = errorf(StatusMalformedRequest,
			fmt.Sprintf("%s: %s (at byte %d)", r.what, fmt.Sprintf(format, args...), r.off))
	}
	r.off = len(r.b)
}

func (r *fieldReader) left() int { return len(r.b) - r.off }

func (r *fieldReader) need(n int, field string) bool {
	if r.err != nil {
		return false
	}
	if n > r.left() {
		r.fail("%s: truncated: need %d bytes, %d left", field, n, r.left())
		return false
	}
	return true
}

func (r *fieldReader) u8(field string) uint8 {
	if !r.need(1, field) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *fieldReader) u16(field string) uint16 {
	if !r.need(2, field) {
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *fieldReader) u32(field string) uint32 {
	if !r.need(4, field) {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *fieldReader) u64(field string) uint64 {
	if !r.need(8, field) {
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *fieldReader) i64(field string) int64 { return int64(r.u64(field)) }

// enum reads a u8 that must be at most hi.
func (r *fieldReader) enum(hi uint8, field string) uint8 {
	v := r.u8(field)
	if v > hi {
		r.fail("%s: unknown value %d", field, v)
		return 0
	}
	return v
}

func (r *fieldReader) bool8(field string) bool { return r.enum(1, field) == 1 }

// zero reads n reserved bytes that must be zero.
func (r *fieldReader) zero(n int, field string) {
	if !r.need(n, field) {
		return
	}
	for _, c := range r.b[r.off : r.off+n] {
		if c != 0 {
			r.fail("%s: reserved bytes are not zero", field)
			return
		}
	}
	r.off += n
}

// duration reads nanoseconds as a u64 that must fit an int64.
func (r *fieldReader) duration(field string) time.Duration {
	v := r.u64(field)
	if v > math.MaxInt64 {
		r.fail("%s: duration overflows", field)
		return 0
	}
	return time.Duration(v)
}

// fixed returns the next n bytes, aliasing the body.
func (r *fieldReader) fixed(n int, field string) []byte {
	if !r.need(n, field) {
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

// span reads a byte string of n bytes (n already read), bounded by hi. It
// returns nil for an empty string and otherwise aliases the body, capped so
// that an append by the caller cannot overwrite the next field.
func (r *fieldReader) span(n, hi int, field string) []byte {
	if r.err != nil {
		return nil
	}
	if n > hi {
		r.fail("%s: length %d exceeds the limit of %d", field, n, hi)
		return nil
	}
	if n == 0 {
		return nil
	}
	return r.fixed(n, field)
}

func (r *fieldReader) bytes16(hi int, field string) []byte {
	return r.span(int(r.u16(field)), hi, field)
}

func (r *fieldReader) bytes32(hi int, field string) []byte {
	return r.span(int(r.u32(field)), hi, field)
}

// str16 reads a u16-prefixed UTF-8 string into *dst. It allocates only
// when the value differs from what *dst holds, so decoding the same names
// into a reused message does not allocate.
func (r *fieldReader) str16(dst *string, hi int, field string) {
	b := r.bytes16(hi, field)
	if r.err != nil {
		return
	}
	if !utf8.Valid(b) {
		r.fail("%s: not UTF-8", field)
		return
	}
	if *dst != string(b) {
		*dst = string(b)
	}
}

// count reads a u32 list length and checks it against MaxListLen and the
// bytes left, given the smallest encoding of one entry, before the caller
// allocates anything for the entries.
func (r *fieldReader) count(minEntry int, field string) int {
	n := r.u32(field)
	if r.err != nil {
		return 0
	}
	if n > MaxListLen {
		r.fail("%s: %d entries exceed the limit of %d", field, n, MaxListLen)
		return 0
	}
	if uint64(n)*uint64(minEntry) > uint64(r.left()) {
		r.fail("%s: %d entries cannot fit in %d bytes", field, n, r.left())
		return 0
	}
	return int(n)
}

// finish reports the sticky error, or trailing bytes.
func (r *fieldReader) finish() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	return r.err
}

// resize returns s with length n, reusing its array when it is big enough.
// Callers have bounded n with count.
func resize[T any](s []T, n int) []T {
	if n == 0 {
		return s[:0]
	}
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// fieldWriter appends a body. The first error sticks; result returns the
// destination as it was before the message and that error.
type fieldWriter struct {
	b     []byte
	start int
	err   error
	what  string
}

func newFieldWriter(dst []byte, what string) fieldWriter {
	return fieldWriter{b: dst, start: len(dst), what: what}
}

func (w *fieldWriter) fail(status Status, format string, args ...any) {
	if w.err == nil {
		w.err = errorf(status, w.what+": "+fmt.Sprintf(format, args...))
	}
}

func (w *fieldWriter) result() ([]byte, error) {
	if w.err != nil {
		return w.b[:w.start], w.err
	}
	return w.b, nil
}

func (w *fieldWriter) u8(v uint8)   { w.b = append(w.b, v) }
func (w *fieldWriter) u16(v uint16) { w.b = binary.LittleEndian.AppendUint16(w.b, v) }
func (w *fieldWriter) u32(v uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *fieldWriter) u64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *fieldWriter) i64(v int64)  { w.b = binary.LittleEndian.AppendUint64(w.b, uint64(v)) }

func (w *fieldWriter) bool8(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

// enum writes a u8 enum value that must be at most hi.
func (w *fieldWriter) enum(v, hi uint8, field string) {
	if v > hi {
		w.fail(StatusInvalidArgument, "%s: unknown value %d", field, v)
	}
	w.u8(v)
}

func (w *fieldWriter) zero(n int) {
	for range n {
		w.b = append(w.b, 0)
	}
}

func (w *fieldWriter) duration(d time.Duration, field string) {
	if d < 0 {
		w.fail(StatusInvalidArgument, "%s: negative duration %v", field, d)
	}
	w.u64(uint64(d))
}

func (w *fieldWriter) fixed(b []byte) { w.b = append(w.b, b...) }

func (w *fieldWriter) bytes16(b []byte, hi int, field string) {
	if len(b) > hi {
		w.fail(StatusMessageTooLarge, "%s: length %d exceeds the limit of %d", field, len(b), hi)
	}
	w.u16(uint16(len(b)))
	w.b = append(w.b, b...)
}

func (w *fieldWriter) bytes32(b []byte, hi int, field string) {
	if len(b) > hi {
		w.fail(StatusMessageTooLarge, "%s: length %d exceeds the limit of %d", field, len(b), hi)
	}
	w.u32(uint32(len(b)))
	w.b = append(w.b, b...)
}

func (w *fieldWriter) str16(s string, hi int, field string) {
	if len(s) > hi {
		w.fail(StatusInvalidArgument, "%s: length %d exceeds the limit of %d", field, len(s), hi)
	} else if !utf8.ValidString(s) {
		w.fail(StatusInvalidArgument, "%s: not UTF-8", field)
	}
	w.u16(uint16(len(s)))
	w.b = append(w.b, s...)
}

// text writes a human message, cut to MaxTextLen at a rune boundary, with
// invalid UTF-8 replaced, so that an error reply can always be encoded.
func (w *fieldWriter) text(s string) {
	s = clipText(s)
	w.u16(uint16(len(s)))
	w.b = append(w.b, s...)
}

func clipText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxTextLen {
		return s
	}
	cut := MaxTextLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// count writes a list length, which must be at most MaxListLen.
func (w *fieldWriter) count(n int, field string) {
	if n > MaxListLen {
		w.fail(StatusMessageTooLarge, "%s: %d entries exceed the limit of %d", field, n, MaxListLen)
	}
	w.u32(uint32(n))
}
