package quic

import (
	"bytes"
	"testing"
)

// TestIdleReaderHoldsNoBuffer: a frame reader takes a read buffer to read
// small frames (and the ones that came with them), and holds none once
// every frame read ahead was handed out: a stream waiting for its next
// request, or a device's poll waiting for a command, costs no buffer.
func TestIdleReaderHoldsNoBuffer(t *testing.T) {
	var in []byte
	for _, b := range []string{"one", "two", "three"} {
		in = append(in, frame(b)...)
	}
	big := bytes.Repeat([]byte("z"), 3*defaultStreamBufferSize)
	in = append(in, frame(string(big))...)
	fr := newFrameReader(bytes.NewReader(in), WireFraming(), 1<<20)
	read := func() []byte {
		t.Helper()
		n, err := fr.readHeader()
		if err != nil {
			t.Fatal(err)
		}
		f, err := fr.readBody(n, headHook{})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if fr.br != nil {
		t.Fatal("a new reader holds a buffer")
	}
	if got := bodyOf(read()); got != "one" || fr.br == nil {
		t.Fatalf("first frame %q, buffer held %v: want \"one\", the frames after it read ahead", got, fr.br != nil)
	}
	read()
	if got := bodyOf(read()); got != "three" {
		t.Fatalf("third frame %q", got)
	}
	// The big frame's header came with the small ones; its body (larger
	// than a buffer) is read straight into the frame.
	if got := read(); !bytes.Equal(got[headerLen:], big) {
		t.Fatal("the big frame differs")
	}
	if fr.br != nil {
		t.Errorf("with nothing read ahead, the reader holds a %d-byte buffer", fr.br.Size())
	}
}

// TestWriteBufferHeldUntilFlushed: small frames are buffered in a pooled
// buffer until a flush, which gives it back; a frame as large as the
// buffer goes straight to the stream.
func TestWriteBufferHeldUntilFlushed(t *testing.T) {
	var out bytes.Buffer
	wb := writeBuffer{w: &out}
	if _, err := wb.Write(frame("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := wb.Write(frame("b")); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || wb.bw == nil {
		t.Fatalf("small frames were written before a flush (%d bytes out)", out.Len())
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := append(frame("a"), frame("b")...); !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("flushed %d bytes, want the two frames (%d)", out.Len(), len(want))
	}
	if wb.bw != nil {
		t.Error("a flushed writer still holds its buffer")
	}
	big := frame(string(bytes.Repeat([]byte("z"), defaultStreamBufferSize)))
	out.Reset()
	if _, err := wb.Write(big); err != nil {
		t.Fatal(err)
	}
	if out.Len() != len(big) || wb.bw != nil {
		t.Errorf("a frame as large as the buffer: %d bytes out of %d written at once, buffer held %v", out.Len(), len(big), wb.bw != nil)
	}
}
