package quic

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"
	"testing"
)

// TestAnnouncedFrameIsNotAllocated: a frame announcing 60 MiB of which
// 10 bytes arrive costs what arrived, not what was announced (a hostile
// node's reply must not make a client allocate it); a frame of several
// times the growth step that does arrive is read whole.
func TestAnnouncedFrameIsNotAllocated(t *testing.T) {
	announced := binary.LittleEndian.AppendUint32(nil, 60<<20)
	announced = append(announced, make([]byte, 10)...)
	fr := newFrameReader(bytes.NewReader(announced), LengthPrefixed(), 64<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := fr.readHeader()
	if err == nil {
		_, err = fr.readBody(n, headHook{})
	}
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a frame cut short was read whole")
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 2*frameGrowStep {
		t.Fatalf("reading 10 bytes of a frame announcing 60 MiB allocated %d bytes", grown)
	}

	body := make([]byte, 3*frameGrowStep+12345)
	for i := range body {
		body[i] = byte(i * 7)
	}
	fr = newFrameReader(io.MultiReader(bytes.NewReader(AppendLengthPrefixed(nil, body))), LengthPrefixed(), 64<<20)
	n, err = fr.readHeader()
	if err != nil {
		t.Fatal(err)
	}
	frame, err := fr.readBody(n, headHook{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(LengthPrefixedBody(frame), body) {
		t.Fatal("a frame read in growing steps differs from the one sent")
	}
}

// TestFrameJustOverTheStepIsReadOnce: a frame a little longer than the
// growth step (a 1 MiB record with its request's fields) is read into
// one buffer of its length, not into the step and then copied into twice
// the step.
func TestFrameJustOverTheStepIsReadOnce(t *testing.T) {
	body := make([]byte, frameGrowStep+700)
	for i := range body {
		body[i] = byte(i * 13)
	}
	fr := newFrameReader(bytes.NewReader(AppendLengthPrefixed(nil, body)), LengthPrefixed(), 64<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := fr.readHeader()
	if err != nil {
		t.Fatal(err)
	}
	frame, err := fr.readBody(n, headHook{})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(LengthPrefixedBody(frame), body) {
		t.Fatal("the frame read differs from the one sent")
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > frameGrowStep+frameGrowStep/2 {
		t.Fatalf("reading a frame of %d bytes allocated %d bytes: it was grown, not read once", n, grown)
	}
}
