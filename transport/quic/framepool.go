package quic

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Frames of MinPooledFrame bytes and more are read into buffers that
// callers may hand back with RecycleFrame once nothing holds them. A
// fresh buffer is allocated, and zeroed, for every frame otherwise: for a
// node taking in batches of 100 KiB, zeroing its request buffers cost as
// much CPU as checksumming them twice; for one taking in a 1 KiB message
// at a time, the fresh frames were most of what it allocated, and the
// garbage collections they caused (several a second on a 4 MB heap) were
// the slowest percent of its replies. Nothing is recycled unless a caller
// says so, so a frame kept forever (a batch in the engine's tail cache) is
// simply left to the garbage collector.
const (
	// MinPooledFrame is the smallest frame FrameBuffer takes from, and
	// RecycleFrame gives back to, the free frames: a device's poll (about
	// 80 bytes) or a produce of a short reading is one; a frame smaller
	// still is a few fields, cheaper to allocate than to look up.
	MinPooledFrame = 64
	maxPooledFrame = 8 << 20
	frameClasses   = 24 // by floor(log2(capacity)); classes below 6 and above 23 stay empty
	// maxFreeFrameBytes bounds the memory of the free frames. A
	// sync.Pool would drop them at every garbage collection, which a
	// node taking in hundreds of MB/s runs several times a second.
	maxFreeFrameBytes = 32 << 20
	// frameFitTries is how many of a class's free buffers, the last
	// freed first, FrameBuffer looks at.
	frameFitTries = 4
)

var freeFrames freeFrameList

type freeFrameList struct {
	mu      sync.Mutex
	classes [frameClasses][][]byte
	bytes   int
}

// FrameBuffer returns a buffer of length n for a frame — one recycled, if
// one fits; its contents are garbage. ReadFrame reads into these, and a
// client may build the frames it sends in them (and recycle those whose
// reply has come).
func FrameBuffer(n int) []byte {
	if n < MinPooledFrame || n > maxPooledFrame {
		return make([]byte, n)
	}
	// A buffer in class k has a capacity in [2^k, 2^(k+1)). Frames of n
	// bytes get buffers of frameCap(n); one of the last few freed in that
	// capacity's class, or in the next one, is taken if it holds n bytes
	// without wasting more than a quarter of them (a frame may be kept, by
	// length, in a cache with a byte budget). Looking past the last one,
	// and in the next class, matters for frames of varying length near a
	// power of two, such as poll replies filled up to a limit by whole
	// batches: half of them are a little longer than the last buffer
	// freed, or than every buffer of their class.
	c := frameCap(n)
	k := bits.Len(uint(c)) - 1
	f := &freeFrames
	f.mu.Lock()
	b := f.take(k, n)
	if b == nil && k+1 < frameClasses {
		b = f.take(k+1, n)
	}
	f.mu.Unlock()
	if b != nil {
		return b[:n]
	}
	return make([]byte, n, c)
}

// take removes and returns one of the last frameFitTries buffers of class
// k that holds n bytes without wasting more than a quarter of them, or
// nil. The caller holds f.mu.
func (f *freeFrameList) take(k, n int) []byte {
	class := &f.classes[k]
	for i := len(*class) - 1; i >= max(0, len(*class)-frameFitTries); i-- {
		if b := (*class)[i]; cap(b) >= n && cap(b)-n <= n/4 {
			last := len(*class) - 1
			(*class)[i] = (*class)[last]
			(*class)[last] = nil
			*class = (*class)[:last]
			f.bytes -= cap(b)
			return b
		}
	}
	return nil
}

// frameCap is the capacity of a new buffer for a frame of n bytes:
// rounded up a little, to an eighth of n's power of two and at most to
// 4 KiB, so that frames of nearly the same size share buffers.
func frameCap(n int) int {
	step := min(1<<(bits.Len(uint(n))-1)/8, 4096)
	return (n + step - 1) / step * step
}

// RecycleFrame hands back a frame read by ReadFrame (a request on a node,
// a reply on a client), or one from FrameBuffer a client has sent and is
// done with, for a later frame. Call it only
// when nothing holds frame or any slice of it any more: its bytes will be
// overwritten. Recycling is optional; frames never recycled are garbage
// collected, and so are frames recycled past the free frames' budget.
func RecycleFrame(frame []byte) {
	c := cap(frame)
	if c < MinPooledFrame || c > maxPooledFrame {
		return
	}
	f := &freeFrames
	f.mu.Lock()
	if f.bytes+c <= maxFreeFrameBytes {
		class := &f.classes[bits.Len(uint(c))-1]
		*class = append(*class, frame[:0])
		f.bytes += c
	}
	f.mu.Unlock()
}

// SharedFrame is a frame held by several owners, each with a share: a
// node's request handler and the storage engine holding the batch inside
// the frame, say. The frame is recycled when every share has been dropped,
// and never if one never is.
type SharedFrame struct {
	frame  []byte
	shares atomic.Int32
}

// ShareFrame returns frame held by shares owners.
func ShareFrame(frame []byte, shares int32) *SharedFrame {
	f := &SharedFrame{frame: frame}
	f.shares.Store(shares)
	return f
}

// Drop gives up one share. Each owner drops its share once, when it holds
// no slice of the frame any more.
func (f *SharedFrame) Drop() {
	if n := f.shares.Add(-1); n == 0 {
		RecycleFrame(f.frame)
	} else if n < 0 {
		panic("quic: SharedFrame dropped more times than it was shared")
	}
}
