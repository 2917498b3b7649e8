package quic

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestFramings(t *testing.T) {
	for name, tc := range map[string]struct {
		f     Framing
		build func(body []byte) []byte
	}{
		"wire":          {WireFraming(), func(b []byte) []byte { return frame(string(b)) }},
		"length-prefix": {LengthPrefixed(), func(b []byte) []byte { return AppendLengthPrefixed(nil, b) }},
	} {
		t.Run(name, func(t *testing.T) {
			var stream bytes.Buffer
			bodies := [][]byte{nil, []byte("a"), bytes.Repeat([]byte("b"), 70_000)}
			for _, b := range bodies {
				stream.Write(tc.build(b))
			}
			fr := newFrameReader(&stream, tc.f, 1<<20)
			for _, b := range bodies {
				n, err := fr.readHeader()
				if err != nil {
					t.Fatal(err)
				}
				got, err := fr.readBody(n, headHook{})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, tc.build(b)) {
					t.Fatalf("frame of a %d-byte body differs", len(b))
				}
				if err := checkFrame(tc.f, got, 0); err != nil {
					t.Errorf("checkFrame: %v", err)
				}
			}
			if _, err := fr.readHeader(); err != io.EOF {
				t.Errorf("after the last frame: %v, want io.EOF", err)
			}

			big := tc.build(bytes.Repeat([]byte("c"), 100))
			fr = newFrameReader(bytes.NewReader(big), tc.f, 50)
			var tooLarge *FrameTooLargeError
			if _, err := fr.readHeader(); !errors.As(err, &tooLarge) || tooLarge.Size != len(big) || tooLarge.Max != 50 {
				t.Errorf("oversized: %v", err)
			}
			fr = newFrameReader(bytes.NewReader(big[:len(big)-1]), tc.f, 1<<20)
			n, err := fr.readHeader()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fr.readBody(n, headHook{}); !errors.Is(err, ErrProtocol) {
				t.Errorf("truncated body: %v, want ErrProtocol", err)
			}
			fr = newFrameReader(bytes.NewReader(big[:2]), tc.f, 1<<20)
			if _, err := fr.readHeader(); !errors.Is(err, ErrProtocol) {
				t.Errorf("truncated header: %v, want ErrProtocol", err)
			}
			if err := checkFrame(tc.f, append(big, 0), 0); !errors.Is(err, ErrProtocol) {
				t.Errorf("checkFrame of a frame with a trailing byte: %v", err)
			}
			if err := checkFrame(tc.f, big[:1], 0); !errors.Is(err, ErrProtocol) {
				t.Errorf("checkFrame of a byte: %v", err)
			}
		})
	}
}

func TestBudget(t *testing.T) {
	ctx := context.Background()
	b := newBudget(10)
	if waited, err := b.acquire(ctx, 6, nil); waited || err != nil {
		t.Fatalf("first acquire: %v, %v", waited, err)
	}
	// A large waiter comes first; a small one behind it must not overtake.
	large, small := make(chan error, 1), make(chan error, 1)
	reported := make(chan int, 2)
	onWait := func(n int) { reported <- n }
	go func() { _, err := b.acquire(ctx, 8, onWait); large <- err }()
	wait(t, reported, "the large waiter")
	go func() { _, err := b.acquire(ctx, 2, onWait); small <- err }()
	wait(t, reported, "the small waiter")
	if b.tryAcquire(1) {
		t.Fatal("tryAcquire jumped the queue")
	}
	b.release(6)
	if err := wait(t, large, "the large grant"); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, small, "the small grant"); err != nil {
		t.Fatal(err)
	}
	if b.inUse() != 10 {
		t.Errorf("in use %d, want 10", b.inUse())
	}

	// A waiter whose context ends gives up its place, and the one behind it
	// is served.
	cctx, cancel := context.WithCancel(ctx)
	gone, next := make(chan error, 1), make(chan error, 1)
	go func() { _, err := b.acquire(cctx, 9, onWait); gone <- err }()
	wait(t, reported, "the waiter to cancel")
	go func() { _, err := b.acquire(ctx, 1, onWait); next <- err }()
	wait(t, reported, "the waiter behind it")
	cancel()
	if err := wait(t, gone, "the cancelled waiter"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled waiter: %v", err)
	}
	b.release(2)
	if err := wait(t, next, "the waiter behind the cancelled one"); err != nil {
		t.Fatal(err)
	}
	if b.inUse() != 9 || b.waits.Load() != 4 {
		t.Errorf("in use %d, waits %d", b.inUse(), b.waits.Load())
	}
}

// TestFramesThroughShortReads: frames large and small, back to back, read
// from a stream that returns a few bytes at a time, come out whole and in
// order (a header read past the buffer, a body read past it or through
// it).
func TestFramesThroughShortReads(t *testing.T) {
	bodies := [][]byte{bytes.Repeat([]byte("x"), 70_000), []byte("a"), nil, bytes.Repeat([]byte("y"), 200_000), []byte("bc")}
	var all []byte
	for _, b := range bodies {
		all = append(all, frame(string(b))...)
	}
	for name, r := range map[string]io.Reader{
		"half":     iotest.HalfReader(bytes.NewReader(all)),
		"one byte": iotest.OneByteReader(bytes.NewReader(all)),
		"whole":    bytes.NewReader(all),
	} {
		fr := newFrameReader(r, WireFraming(), 1<<20)
		for i, b := range bodies {
			n, err := fr.readHeader()
			if err != nil {
				t.Fatalf("%s: frame %d: %v", name, i, err)
			}
			got, err := fr.readBody(n, headHook{})
			if err != nil {
				t.Fatalf("%s: frame %d: %v", name, i, err)
			}
			if !bytes.Equal(got, frame(string(b))) {
				t.Fatalf("%s: frame %d (a %d-byte body) differs", name, i, len(b))
			}
		}
		if _, err := fr.readHeader(); err != io.EOF {
			t.Errorf("%s: after the last frame: %v, want io.EOF", name, err)
		}
	}
}
