package quic

import (
	"io"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/internal/allocs"
)

// Reading a request and answering it costs this package's own path
// nothing on the heap, once its frame buffers are warm: the Request is
// reused after Release, the frame (recycled by its holder, as a node
// does a produce's once the engine let go of it) is read into again, and
// the read and write buffers come from their pools. Before requests were
// pooled, each was an allocation; before frames under 256 bytes were
// pooled, a small one (a device's poll, a produce of a short reading)
// was one more. QUIC itself is not in the count: the stream here reads
// from memory and writes to nothing.
func TestServeFrameAllocations(t *testing.T) {
	allocs.SkipUnderRace(t)
	for _, size := range []int{100, 350, 4 << 10} {
		s := memoryStream(frame(strings.Repeat("r", size-headerLen)))
		reply := frame(strings.Repeat("a", 41-headerLen))
		n, bytes := allocs.Least(500, func() {
			r, err := s.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			f := r.Frame
			if len(f) != size {
				t.Fatalf("read %d bytes, want %d", len(f), size)
			}
			if err := s.Reply(r, reply); err != nil {
				t.Fatal(err)
			}
			RecycleFrame(f)
		})
		t.Logf("a %d-byte request and its reply: %.2f allocations, %.1f bytes", size, n, bytes)
		if n > 0 {
			t.Errorf("a %d-byte request and its reply allocate %.2f times, %.1f bytes (want none)", size, n, bytes)
		}
		if got := s.c.l.budget.inUse(); got != 0 {
			t.Errorf("%d bytes of budget still in use", got)
		}
	}
}

// A request released by its stream's end (the connection went away while
// its holder worked on it) is not reused: the holder's own Release, later,
// finds it released and leaves it, and the budget is given back once.
func TestReleaseAfterStreamEnd(t *testing.T) {
	s := memoryStream(frame("r"))
	held, err := s.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	s.finish()
	if got := s.c.l.budget.inUse(); got != 0 {
		t.Fatalf("the stream's end left %d bytes of budget in use", got)
	}
	held.Release()
	if held.Stream() != s || !held.released {
		t.Fatal("a request released by its stream's end was reused")
	}
	if got := s.c.l.stats.requestsInFlight.Load(); got != 0 {
		t.Fatalf("%d requests in flight after both releases", got)
	}
}

// memoryStream is a server stream whose client sends f over and over,
// and whose replies go nowhere: the package's path without QUIC.
func memoryStream(f []byte) *Stream {
	cfg, _ := Config{}.withDefaults()
	l := &Listener{cfg: cfg, budget: newBudget(cfg.InflightBudget)}
	c := &Conn{l: l, streams: map[*Stream]struct{}{}}
	s := &Stream{c: c, fr: newFrameReader(&repeatReader{b: f}, cfg.Framing, cfg.MaxFrameSize),
		outstanding: map[*Request]struct{}{}}
	s.bw.w = io.Discard
	c.streams[s] = struct{}{}
	return s
}

// repeatReader reads b over and over.
type repeatReader struct {
	b   []byte
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.b[r.off:])
		n += c
		r.off = (r.off + c) % len(r.b)
	}
	return n, nil
}
