package wire

import (
	"encoding/binary"
	"time"
)

// AuthFlags are what a client announces in its Authenticate request: the
// optional fields of replies it reads. A node sends such a field only to
// a connection that announced it, so an older client never receives one.
type AuthFlags uint8

const (
	// AuthReadsRetryAfter: the client reads a busy reply's retry-after
	// (AppendBusyReply).
	AuthReadsRetryAfter AuthFlags = 1 << 0

	knownAuthFlags = AuthReadsRetryAfter
)

// MaxRetryAfter is the longest retry-after a node hints; a longer one
// decodes as this.
const MaxRetryAfter = time.Minute

// retryAfterSize is a busy reply's optional last field: the retry-after,
// in milliseconds, as a u32.
const retryAfterSize = 4

// AppendBusyReply appends a StatusBusy reply to req that tells the client
// how long to wait before sending again:
//
//	status u16 (busy) | message text | retry after u32 (milliseconds, at least 1)
//
// The retry-after is an optional last field of the error reply: send it
// only to a connection whose Authenticate set AuthReadsRetryAfter, and
// AppendErrorReply to any other (an older client reads trailing bytes
// after a non-OK status as a malformed reply). A hint below a
// millisecond travels as one, above MaxRetryAfter as MaxRetryAfter.
func AppendBusyReply(dst []byte, req FrameHeader, message string, retryAfter time.Duration) []byte {
	dst, start := StartFrame(dst, FrameHeader{Version: ProtocolVersion, Flags: FlagReply, Kind: req.Kind, ID: req.ID})
	w := newFieldWriter(dst, "")
	w.u16(uint16(StatusBusy))
	w.text(message)
	w.u32(uint32(min(max(retryAfter, time.Millisecond), MaxRetryAfter) / time.Millisecond))
	dst, _ = FinishFrame(w.b, start) // a bounded message always fits
	return dst
}

// retryAfterOf reads the optional last field after a non-OK status: the
// retry-after of a busy reply (0 when absent). Anything else after a
// non-OK status is malformed.
func retryAfterOf(status Status, tail []byte) (time.Duration, bool) {
	switch {
	case len(tail) == 0:
		return 0, true
	case status != StatusBusy || len(tail) != retryAfterSize:
		return 0, false
	}
	ms := time.Duration(binary.LittleEndian.Uint32(tail)) * time.Millisecond
	return min(max(ms, time.Millisecond), MaxRetryAfter), true
}
