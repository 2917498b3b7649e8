package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Protocol constants.
const (
	// ProtocolVersion is the version this package speaks; it is the version
	// byte of every frame it writes.
	ProtocolVersion uint8 = 1
	// ALPN is the TLS application protocol a Ledge QUIC connection
	// negotiates.
	ALPN = "ledge/1"
	// DefaultPort is the UDP port a node listens on unless told otherwise.
	DefaultPort = 7420
	// FrameHeaderSize is the size of the fixed frame header.
	FrameHeaderSize = 12
	// DefaultMaxFrameSize is the largest frame, header included, a node
	// accepts unless configured otherwise; Authenticate's reply tells a
	// client the node's actual limit. Clients accept larger reply frames
	// (a poll reply is as large as the poll's MaxBytes allows).
	DefaultMaxFrameSize = 8 << 20
)

// The frame header's length field counts the bytes after itself: the rest
// of the header and the body.
const headerAfterLength = FrameHeaderSize - 4

// minFrameBuffer is what ReadFrame allocates at least, so that a stream of
// small frames settles on one buffer.
const minFrameBuffer = 4 << 10

// FrameFlags are the flag bits of a frame header.
type FrameFlags uint8

// FlagReply marks a reply frame. Every other bit is reserved and zero in
// version 1.
const FlagReply FrameFlags = 1 << 0

const knownFlags = FlagReply

// FrameHeader is the fixed header of a frame, after its length field. Its
// layout is the same in every protocol version, so that a peer can always
// answer a frame of a version it does not speak.
//
//	off size field (little-endian)
//	 0   4   length: bytes after this field (8 + body length)
//	 4   1   version
//	 5   1   flags
//	 6   2   kind
//	 8   4   request id, echoed by the reply
//	12   ..  body
type FrameHeader struct {
	Version uint8
	Flags   FrameFlags
	Kind    Kind
	// ID is chosen by the client and echoed by the reply. Replies on a
	// stream come back in request order, so the id only confirms what the
	// order already says; it also names the request in logs.
	ID uint32
}

// IsReply reports whether the frame is a reply.
func (h FrameHeader) IsReply() bool { return h.Flags&FlagReply != 0 }

// Frame is a frame header and its body.
type Frame struct {
	FrameHeader
	// Body is the frame's body. After ReadFrame it is the caller's buffer
	// (or a new one), valid until the caller reuses that buffer; decoded
	// messages alias it.
	Body []byte
}

// FrameTooLargeError reports a frame whose declared size exceeds the
// reader's limit. The header was read and is valid, and nothing was
// allocated for the body: the reader may discard the rest of the frame
// (Size − FrameHeaderSize bytes) and answer the request with
// StatusMessageTooLarge, or reset the stream.
type FrameTooLargeError struct {
	Header FrameHeader
	Size   int // size of the whole frame, header included
	Max    int // the reader's limit
}

// Error implements error.
func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("frame of %d bytes exceeds the limit of %d (%s request %d)",
		e.Size, e.Max, e.Header.Kind, e.Header.ID)
}

// Is makes errors.Is(err, StatusMessageTooLarge) true.
func (e *FrameTooLargeError) Is(target error) bool { return target == StatusMessageTooLarge }

// ParseFrameHeader decodes the first FrameHeaderSize bytes of b and returns
// the header and the length of the body that follows. Limits count whole
// frames, header included, as a transport moving whole frames sees them. A
// length field too small for a header is a *Error with
// StatusMalformedRequest: the stream has lost its framing and must be
// reset. A frame larger than limit is a *FrameTooLargeError carrying the
// header.
func ParseFrameHeader(b []byte, limit int) (FrameHeader, int, error) {
	size, err := FrameLen(b)
	if err != nil {
		return FrameHeader{}, 0, err
	}
	le := binary.LittleEndian
	h := FrameHeader{Version: b[4], Flags: FrameFlags(b[5]), Kind: Kind(le.Uint16(b[6:])), ID: le.Uint32(b[8:])}
	if size > limit {
		return h, 0, &FrameTooLargeError{Header: h, Size: size, Max: limit}
	}
	return h, size - FrameHeaderSize, nil
}

// FrameLen returns the size of the whole frame, header included, that
// starts with header (at least FrameHeaderSize bytes). It is what a
// transport that moves whole frames needs to bound one before reading it.
func FrameLen(header []byte) (int, error) {
	if len(header) < FrameHeaderSize {
		return 0, errorf(StatusMalformedRequest, "frame header truncated")
	}
	length := binary.LittleEndian.Uint32(header)
	if length < headerAfterLength {
		return 0, errorf(StatusMalformedRequest,
			fmt.Sprintf("frame length %d is shorter than the frame header", length))
	}
	return int(length) + 4, nil
}

// ParseFrame parses one whole frame, header included, as a transport
// hands it over. Body aliases frame.
func ParseFrame(frame []byte, limit int) (Frame, error) {
	h, n, err := ParseFrameHeader(frame, limit)
	if err != nil {
		return Frame{FrameHeader: h}, err
	}
	if n != len(frame)-FrameHeaderSize {
		return Frame{FrameHeader: h}, errorf(StatusMalformedRequest,
			fmt.Sprintf("frame header says %d body bytes, frame has %d", n, len(frame)-FrameHeaderSize))
	}
	return Frame{FrameHeader: h, Body: frame[FrameHeaderSize:]}, nil
}

// ReadFrame reads one frame from r. The declared size is checked against
// limit (which counts the whole frame) before anything is allocated. The
// body is read into buf when cap(buf) is large enough, and into a new slice
// otherwise; to reuse the memory, pass f.Body[:0] as buf of the next call —
// unless something kept a message decoded from the frame (a produce batch
// handed to storage), which aliases the body.
//
// A clean end of stream before a frame is io.EOF; one inside a frame is
// io.ErrUnexpectedEOF. See ParseFrameHeader for the framing errors; after a
// *FrameTooLargeError the returned Frame carries the header.
func ReadFrame(r io.Reader, buf []byte, limit int) (Frame, error) {
	if cap(buf) < FrameHeaderSize {
		buf = make([]byte, 0, minFrameBuffer)
	}
	hdr := buf[:FrameHeaderSize]
	if _, err := io.ReadFull(r, hdr); err != nil {
		return Frame{}, err
	}
	h, n, err := ParseFrameHeader(hdr, limit)
	if err != nil {
		return Frame{FrameHeader: h}, err
	}
	if cap(buf) < n {
		buf = make([]byte, n, max(n, minFrameBuffer))
	}
	body := buf[:n]
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{FrameHeader: h}, err
	}
	return Frame{FrameHeader: h, Body: body}, nil
}

// StartFrame appends a frame header with a placeholder length to dst and
// returns where the frame starts; append the body, then call FinishFrame.
func StartFrame(dst []byte, h FrameHeader) ([]byte, int) {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = append(dst, h.Version, byte(h.Flags))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(h.Kind))
	dst = binary.LittleEndian.AppendUint32(dst, h.ID)
	return dst, start
}

// FinishFrame writes the length of the frame that starts at start. It
// fails, and drops the frame, if the body cannot be described by the
// header's length field.
func FinishFrame(b []byte, start int) ([]byte, error) {
	n := len(b) - start - 4
	if n < headerAfterLength || uint64(n) > math.MaxUint32 {
		return b[:start], errorf(StatusMessageTooLarge, fmt.Sprintf("frame of %d bytes", n))
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(n))
	return b, nil
}

// AppendFrame appends a whole frame with the given body.
func AppendFrame(dst []byte, h FrameHeader, body []byte) ([]byte, error) {
	dst, start := StartFrame(dst, h)
	return FinishFrame(append(dst, body...), start)
}

// Message is a request or a reply body of one kind.
type Message interface {
	// Kind is the kind of the request (for a reply: of the request it
	// answers).
	Kind() Kind
	// Encode appends the body to dst. It fails, leaving dst as it was, when
	// a field exceeds its limit or holds a value the protocol cannot
	// express; anything Encode accepts, Decode accepts.
	Encode(dst []byte) ([]byte, error)
	// Decode replaces the message with the one in body. Byte fields alias
	// body; slices and strings of the message are reused when possible.
	// Errors are *Error with StatusMalformedRequest.
	Decode(body []byte) error
}

// AppendRequest appends a request frame carrying m.
func AppendRequest(dst []byte, id uint32, m Message) ([]byte, error) {
	dst, start := StartFrame(dst, FrameHeader{Version: ProtocolVersion, Kind: m.Kind(), ID: id})
	dst, err := m.Encode(dst)
	if err != nil {
		return dst[:start], err
	}
	return FinishFrame(dst, start)
}

// AppendReply appends a successful reply to request id carrying m.
//
// A reply body is: status u16, message (u16 length, UTF-8), then — only
// when the status is StatusOK — the kind's reply payload. The status and
// message keep this layout in every protocol version.
func AppendReply(dst []byte, id uint32, m Message) ([]byte, error) {
	dst, start := StartFrame(dst, FrameHeader{Version: ProtocolVersion, Flags: FlagReply, Kind: m.Kind(), ID: id})
	dst = append(dst, 0, 0, 0, 0) // StatusOK, empty message
	dst, err := m.Encode(dst)
	if err != nil {
		return dst[:start], err
	}
	return FinishFrame(dst, start)
}

// AppendErrorReply appends a reply to req that carries a non-OK status and
// a message for people (cut to MaxTextLen). It never fails, so a node can
// always answer — an unknown kind, an unsupported version, a malformed body.
func AppendErrorReply(dst []byte, req FrameHeader, status Status, message string) []byte {
	dst, start := StartFrame(dst, FrameHeader{Version: ProtocolVersion, Flags: FlagReply, Kind: req.Kind, ID: req.ID})
	w := newFieldWriter(dst, "")
	w.u16(uint16(status))
	w.text(message)
	dst, _ = FinishFrame(w.b, start) // a bounded message always fits
	return dst
}

// CheckRequest says whether a node can serve a request with header h. It
// returns nil, or a *Error whose status and message the node puts in an
// error reply: StatusMalformedRequest for a reply frame or unknown flags,
// StatusUnsupportedVersion, or StatusUnknownKind (also for kinds reserved
// for a later version).
func CheckRequest(h FrameHeader) error {
	switch {
	case h.Flags&FlagReply != 0:
		return errorf(StatusMalformedRequest, "a reply frame was sent as a request")
	case h.Flags&^knownFlags != 0:
		return errorf(StatusMalformedRequest, fmt.Sprintf("unknown frame flags 0x%02x", uint8(h.Flags&^knownFlags)))
	case h.Version != ProtocolVersion:
		return errorf(StatusUnsupportedVersion,
			fmt.Sprintf("protocol version %d is not supported; this node speaks version %d", h.Version, ProtocolVersion))
	case h.Kind.Reserved():
		return errorf(StatusUnknownKind, fmt.Sprintf("%s (0x%04x) is reserved for a later version", h.Kind, uint16(h.Kind)))
	case !h.Kind.Defined():
		return errorf(StatusUnknownKind, fmt.Sprintf("unknown request kind 0x%04x", uint16(h.Kind)))
	}
	return nil
}

// DecodeRequest checks f with CheckRequest and decodes its body into m,
// which must be the request type of f's kind.
func DecodeRequest(f Frame, m Message) error {
	if err := CheckRequest(f.FrameHeader); err != nil {
		return err
	}
	if f.Kind != m.Kind() {
		return errorf(StatusMalformedRequest, fmt.Sprintf("%s frame decoded as %s", f.Kind, m.Kind()))
	}
	return m.Decode(f.Body)
}

// ParseReply splits a reply body into its status, message and payload. A
// payload after a non-OK status is malformed, except a busy reply's
// retry-after (AppendBusyReply), which is returned as the payload.
func ParseReply(body []byte) (Status, string, []byte, error) {
	r := newFieldReader(body, "reply")
	status := Status(r.u16("status"))
	var msg string
	r.str16(&msg, MaxTextLen, "message")
	if r.err != nil {
		return 0, "", nil, r.err
	}
	payload := body[r.off:]
	if _, ok := retryAfterOf(status, payload); status != StatusOK && !ok {
		return 0, "", nil, errorf(StatusMalformedRequest,
			fmt.Sprintf("reply: %d payload bytes after status %s", len(payload), status))
	}
	return status, msg, payload, nil
}

// DecodeReply decodes the reply frame f into m, the reply type of the
// request it answers. A non-OK status is returned as a *Error (test it with
// errors.Is(err, StatusX) or read its RetryClass).
func DecodeReply(f Frame, m Message) error {
	if !f.IsReply() {
		return errorf(StatusMalformedRequest, fmt.Sprintf("%s frame %d is not a reply", f.Kind, f.ID))
	}
	if f.Kind != m.Kind() {
		return errorf(StatusMalformedRequest, fmt.Sprintf("%s reply decoded as %s", f.Kind, m.Kind()))
	}
	status, msg, payload, err := ParseReply(f.Body)
	if err != nil {
		return err
	}
	if status != StatusOK {
		after, _ := retryAfterOf(status, payload)
		return &Error{Status: status, Message: msg, RetryAfter: after}
	}
	if f.Version != ProtocolVersion {
		return errorf(StatusUnsupportedVersion, fmt.Sprintf("reply of protocol version %d", f.Version))
	}
	return m.Decode(payload)
}
