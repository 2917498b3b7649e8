package quic

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// A frame read into a recycled buffer holds exactly its own bytes, never
// those of the frame the buffer held before, whatever the sizes.
func TestRecycledFramesHoldOnlyTheirOwnBytes(t *testing.T) {
	f := Framing{HeaderLen: 4, FrameLen: func(h []byte) (int, error) { return int(binary.LittleEndian.Uint32(h)), nil }}
	mk := func(n int, fill byte) []byte {
		b := bytes.Repeat([]byte{fill}, n)
		binary.LittleEndian.PutUint32(b, uint32(n))
		return b
	}
	sizes := []int{40 << 10, 100 << 10, 90 << 10, 101 << 10, 33 << 10, 1 << 20, 100 << 10, 16, 5 << 20, 1100, 300, 2000, 1100, 257}
	for round := range 3 {
		var stream bytes.Buffer
		var want [][]byte
		for i, n := range sizes {
			fr := mk(n, byte(round*len(sizes)+i+1))
			want = append(want, fr)
			stream.Write(fr)
		}
		r := newFrameReader(&stream, f, 16<<20)
		for i, w := range want {
			n, err := r.readHeader()
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.readBody(n, headHook{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(w) || !bytes.Equal(got, w) {
				t.Fatalf("round %d frame %d (%d bytes): read bytes differ from those sent", round, i, len(w))
			}
			if cap(got) < len(got) || (len(got) >= MinPooledFrame && cap(got)-len(got) > len(got)/4) {
				t.Fatalf("frame of %d bytes in a buffer of %d", len(got), cap(got))
			}
			// Scribble over it, as a later user of the buffer would.
			for j := range got {
				got[j] = 0xEE
			}
			RecycleFrame(got)
		}
	}
}

func BenchmarkReadFrame100KiB(b *testing.B) {
	f := Framing{HeaderLen: 4, FrameLen: func(h []byte) (int, error) { return int(binary.LittleEndian.Uint32(h)), nil }}
	frame := make([]byte, 100<<10)
	binary.LittleEndian.PutUint32(frame, uint32(len(frame)))
	src := bytes.NewReader(frame)
	for _, recycle := range []bool{false, true} {
		name := "fresh"
		if recycle {
			name = "recycled"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			r := newFrameReader(src, f, 1<<20)
			for b.Loop() {
				src.Reset(frame)
				n, err := r.readHeader()
				if err != nil {
					b.Fatal(err)
				}
				got, err := r.readBody(n, headHook{})
				if err != nil {
					b.Fatal(err)
				}
				if recycle {
					RecycleFrame(got)
				}
			}
		})
	}
}

// A node taking one small message at a time reads each request into the
// buffer of the one before, whatever the size: sizes just below a power of
// two included, whose buffers are rounded up past it.
func TestSmallFramesAreReused(t *testing.T) {
	for _, n := range []int{MinPooledFrame, 1100, 2000, 4095, 32<<10 - 1, 60 << 10} {
		first := FrameBuffer(n)
		RecycleFrame(first)
		got := FrameBuffer(n)
		if &got[0] != &first[0] {
			t.Errorf("a frame of %d bytes was not read into the buffer of the last one (capacity %d)", n, cap(first))
		}
		RecycleFrame(got)
		if allocs := testing.AllocsPerRun(100, func() { RecycleFrame(FrameBuffer(n)) }); allocs != 0 {
			t.Errorf("a frame of %d bytes, taken and handed back: %.0f allocations, want 0", n, allocs)
		}
	}
}

// A consumer replaying with polls of up to 4 MiB gets replies of varying
// length just under that: each is read into one of the buffers of the
// replies it recycled, whichever holds it, not into a fresh one.
func TestVaryingPollRepliesReuseTheirBuffers(t *testing.T) {
	const limit = 4 << 20
	lengths := []int{limit - 9000, limit - 100, limit - 5000, limit - 20, limit - 16000, limit - 300}
	held := map[*byte]bool{}
	var bufs [][]byte
	for _, n := range lengths[:2] {
		b := FrameBuffer(n)
		held[&b[:1][0]] = true
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		RecycleFrame(b)
	}
	for _, n := range lengths[2:] {
		b := FrameBuffer(n)
		if !held[&b[:1][0]] {
			t.Fatalf("a reply of %d bytes got a fresh buffer; two recycled ones hold %d and %d bytes", n, cap(bufs[0]), cap(bufs[1]))
		}
		RecycleFrame(b)
	}
}

// A shared frame goes back for reuse only when its last share is dropped.
func TestSharedFrameRecycledByTheLastShare(t *testing.T) {
	frame := FrameBuffer(64 << 10)
	for i := range frame {
		frame[i] = 7
	}
	f := ShareFrame(frame, 2)
	f.Drop()
	for i := range 4 { // a frame taken now is never the one still shared
		if b := FrameBuffer(64 << 10); &b[0] == &frame[0] {
			t.Fatalf("take %d: a frame with a share left was handed out again", i)
		}
	}
	if frame[0] != 7 {
		t.Fatal("a frame with a share left was written")
	}
	f.Drop()
	defer func() {
		if recover() == nil {
			t.Fatal("a third Drop of a frame shared twice did not panic")
		}
	}()
	f.Drop()
}
