package quic

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/ledgemq/ledge/transport/wire"
)

// Framing tells the transport where a frame ends, so that it can bound the
// frame before allocating it. The transport never interprets anything else
// in a frame: it hands whole frames (header included) to the caller and
// writes whole frames it is given. [WireFraming], the protocol's layout, is
// the default; [LengthPrefixed] is a minimal alternative.
type Framing struct {
	// HeaderLen is the fixed number of bytes at the start of every frame
	// that FrameLen needs.
	HeaderLen int
	// FrameLen returns the total length of the frame (header included)
	// that begins with header, or an error for a malformed header. It must
	// not retain header.
	FrameLen func(header []byte) (int, error)
}

// WireFraming is the frame layout of the Ledge protocol (transport/wire):
// a 12-byte header whose first field, a little-endian uint32, counts the
// bytes after it.
func WireFraming() Framing {
	return Framing{HeaderLen: wire.FrameHeaderSize, FrameLen: wire.FrameLen}
}

// lengthPrefixLen is the size of the [LengthPrefixed] header.
const lengthPrefixLen = 4

// LengthPrefixed is the minimal framing: a little-endian uint32 holding
// the number of bytes that follow it.
func LengthPrefixed() Framing {
	return Framing{
		HeaderLen: lengthPrefixLen,
		FrameLen: func(h []byte) (int, error) {
			n := uint64(binary.LittleEndian.Uint32(h))
			if n > math.MaxInt-lengthPrefixLen {
				return 0, fmt.Errorf("%w: length %d", ErrProtocol, n)
			}
			return lengthPrefixLen + int(n), nil
		},
	}
}

// AppendLengthPrefixed appends body to dst as one [LengthPrefixed] frame.
func AppendLengthPrefixed(dst, body []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}

// LengthPrefixedBody returns the body of a [LengthPrefixed] frame.
func LengthPrefixedBody(frame []byte) []byte {
	if len(frame) < lengthPrefixLen {
		return nil
	}
	return frame[lengthPrefixLen:]
}

// frameReader reads frames from a stream, bounding each before it is
// allocated. Its read buffer is pooled: taken to read a frame's body (and
// the frames that came with it), given back once everything read ahead is
// consumed, so a reader waiting for its next frame holds none. It is not
// safe for concurrent use.
type frameReader struct {
	r       io.Reader     // the stream
	br      *bufio.Reader // nil while nothing is read ahead
	framing Framing
	max     int
	header  []byte
}

func newFrameReader(r io.Reader, f Framing, max int) *frameReader {
	return &frameReader{
		r:       r,
		framing: f,
		max:     max,
		header:  make([]byte, f.HeaderLen),
	}
}

// buffered returns how many bytes were read ahead from the stream.
func (fr *frameReader) buffered() int {
	if fr.br == nil {
		return 0
	}
	return fr.br.Buffered()
}

// source returns what to read the rest of the stream from: the read-ahead
// first, if any.
func (fr *frameReader) source() io.Reader {
	if fr.br == nil {
		return fr.r
	}
	return fr.br
}

// giveBackEmpty returns the read buffer to the pool once it holds nothing.
func (fr *frameReader) giveBackEmpty() {
	if fr.br != nil && fr.br.Buffered() == 0 {
		giveReadBuffer(fr.br)
		fr.br = nil
	}
}

// readHeader reads the next frame header and returns the frame's total
// length, checked against the limit. io.EOF means the stream ended cleanly
// between frames.
func (fr *frameReader) readHeader() (int, error) {
	// With nothing buffered the header is read from the stream itself:
	// filling the buffer would take in the start of a large body, only to
	// copy it again into the frame. A body at least as large as the
	// buffer is then read straight into the frame; a smaller one fills
	// the buffer, which takes in the frames after it too.
	fr.giveBackEmpty()
	if _, err := io.ReadFull(fr.source(), fr.header); err != nil {
		if err == io.ErrUnexpectedEOF {
			return 0, fmt.Errorf("%w: stream ended inside a frame header", ErrProtocol)
		}
		return 0, err
	}
	n, err := fr.framing.FrameLen(fr.header)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if n < fr.framing.HeaderLen {
		return 0, fmt.Errorf("%w: frame length %d is shorter than its header", ErrProtocol, n)
	}
	if n > fr.max {
		return n, &FrameTooLargeError{Size: n, Max: fr.max}
	}
	return n, nil
}

// frameGrowStep bounds what a frame's announced length alone allocates:
// a longer frame's buffer grows as its bytes arrive, doubling from this,
// so a peer that announces a large frame (a reply may announce 64 MiB)
// and sends little costs what it sent.
const frameGrowStep = 1 << 20

// frameGrowSlack: a frame at most this much longer than frameGrowStep is
// read into one buffer of its length. A 1 MiB record's produce request is
// a few hundred bytes over 1 MiB; growing it would read it into 1 MiB,
// then copy it into 2 MiB (4 % of the node's CPU at 1 MiB records).
const frameGrowSlack = 64 << 10

// readBody takes a buffer for the frame of total length n announced by
// the last header and reads the rest of it. With a head hook, a frame
// longer than the hook's length is read in two steps, and the hook sees
// its start before the rest is read.
func (fr *frameReader) readBody(n int, head headHook) ([]byte, error) {
	first := n
	if n > frameGrowStep+frameGrowSlack {
		first = frameGrowStep
	}
	frame := FrameBuffer(first)
	copy(frame, fr.header)
	from := fr.framing.HeaderLen
	hooked := false
	if head.fn != nil && head.len > from && n > head.len && head.len <= len(frame) {
		if err := fr.readFull(frame[from:head.len]); err != nil {
			RecycleFrame(frame)
			return nil, err
		}
		head.fn(frame[:head.len:head.len])
		from, hooked = head.len, true
	}
	for {
		if err := fr.readFull(frame[from:]); err != nil {
			RecycleFrame(frame)
			return nil, err
		}
		if len(frame) == n {
			break
		}
		from = len(frame)
		grown := FrameBuffer(min(n, 2*len(frame)))
		copy(grown, frame)
		if !hooked { // the hook may hold the start of the old buffer
			RecycleFrame(frame)
		}
		frame = grown
	}
	fr.giveBackEmpty()
	return frame, nil
}

// readFull reads b, through the read buffer (taken if need be) when b is
// smaller than it: the frames that follow come in the same read.
func (fr *frameReader) readFull(b []byte) error {
	if fr.br == nil && len(b) < defaultStreamBufferSize {
		fr.br = takeReadBuffer(fr.r)
	}
	if _, err := io.ReadFull(fr.source(), b); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return fmt.Errorf("%w: stream ended inside a frame", ErrProtocol)
		}
		return err
	}
	return nil
}

// headHook asks a frame reader to hand the first len bytes of a longer
// frame (header included) to fn before it reads the rest.
type headHook struct {
	len int
	fn  func(head []byte)
}

// checkFrame verifies that frame is exactly one frame under f.
func checkFrame(f Framing, frame []byte, max int) error {
	if len(frame) < f.HeaderLen {
		return fmt.Errorf("%w: %d bytes cannot hold a frame header", ErrProtocol, len(frame))
	}
	n, err := f.FrameLen(frame[:f.HeaderLen])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if n != len(frame) {
		return fmt.Errorf("%w: header says %d bytes, frame has %d", ErrProtocol, n, len(frame))
	}
	if max > 0 && n > max {
		return &FrameTooLargeError{Size: n, Max: max}
	}
	return nil
}
