package quic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// TestWriteFrameParts: a reply written as parts — small ones buffered,
// large ones handed to the stream as they are — arrives as one frame,
// in order with the replies around it; parts that do not add up to their
// header's length are refused before anything is written.
func TestWriteFrameParts(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 8<<10) // 128 KiB
	small := []byte("tail")
	ts := newTestServer(t, Config{})
	ts.serve(t, func(s *Stream, r *Request) {
		body := bodyOf(r.Frame)
		if body != "parts" {
			echo(s, r)
			return
		}
		head := frame("")
		binary.LittleEndian.PutUint32(head, uint32(len(head)-4+len(big)+len(small)))
		bad := [][]byte{head, big} // short of small
		if err := s.WriteFrameParts(bad); !errors.Is(err, ErrProtocol) {
			t.Errorf("parts short of their header's length: %v", err)
		}
		if err := s.WriteFrameParts([][]byte{head, big, small}); err != nil {
			t.Errorf("WriteFrameParts: %v", err)
		}
		if err := s.Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		r.Release()
	})
	p := pipeline(t, ts.dial(t, ClientConfig{}), 4)
	mustEcho(t, p, "before")
	got, err := do(t, p, "parts")
	if err != nil {
		t.Fatal(err)
	}
	if want := string(big) + string(small); got != want {
		t.Fatalf("reply of %d bytes (%q...), want %d", len(got), got[:min(len(got), 16)], len(want))
	}
	mustEcho(t, p, "after")
	if strings.Contains(got, "echo:") {
		t.Fatal("replies interleaved")
	}
}
