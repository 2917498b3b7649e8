package wire_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// A busy reply tells a client that announced it reads one how long to
// wait; the client decodes the hint with the status, and nothing else.
func TestBusyReplyCarriesRetryAfter(t *testing.T) {
	req := wire.FrameHeader{Version: wire.ProtocolVersion, Kind: wire.KindProduce, ID: 7}
	frame := wire.AppendBusyReply(nil, req, "the node is past its CPU", 250*time.Millisecond)
	f := parse(t, frame)
	err := wire.DecodeReply(f, &wire.ProduceReply{})
	var e *wire.Error
	if !errors.As(err, &e) || !errors.Is(err, wire.StatusBusy) {
		t.Fatalf("got %v, want a busy *wire.Error", err)
	}
	if e.RetryAfter != 250*time.Millisecond || e.Message != "the node is past its CPU" {
		t.Fatalf("got retry after %v, message %q", e.RetryAfter, e.Message)
	}
	if e.RetryClass() != wire.ClassRetry {
		t.Fatalf("class %v", e.RetryClass())
	}
}

// A busy reply without the hint (to a client that did not announce it)
// decodes with no retry-after; a hint is clamped to what a node sends.
func TestBusyReplyHintBounds(t *testing.T) {
	req := wire.FrameHeader{Version: wire.ProtocolVersion, Kind: wire.KindProduce, ID: 1}
	for _, c := range []struct {
		name  string
		frame []byte
		want  time.Duration
	}{
		{"no hint", wire.AppendErrorReply(nil, req, wire.StatusBusy, "busy"), 0},
		{"below a millisecond", wire.AppendBusyReply(nil, req, "", time.Microsecond), time.Millisecond},
		{"past the most", wire.AppendBusyReply(nil, req, "", time.Hour), wire.MaxRetryAfter},
	} {
		var e *wire.Error
		if err := wire.DecodeReply(parse(t, c.frame), &wire.ProduceReply{}); !errors.As(err, &e) || e.RetryAfter != c.want {
			t.Errorf("%s: got %v (%+v), want retry after %v", c.name, err, e, c.want)
		}
	}
}

// Only a busy reply may carry the hint: the same bytes after another
// status are malformed, so no other error reply grows unannounced.
func TestRetryAfterOnlyAfterBusy(t *testing.T) {
	req := wire.FrameHeader{Version: wire.ProtocolVersion, Kind: wire.KindProduce, ID: 1}
	busy := wire.AppendBusyReply(nil, req, "", time.Second)
	timeout := append([]byte(nil), busy...)
	timeout[wire.FrameHeaderSize] = byte(wire.StatusTimeout) // the status's low byte
	err := wire.DecodeReply(parse(t, timeout), &wire.ProduceReply{})
	if !errors.Is(err, wire.StatusMalformedRequest) {
		t.Fatalf("timeout with a retry-after: got %v, want malformed", err)
	}
}

// Authenticate's flags are an optional last field: absent when zero, so a
// client that announces nothing sends the bytes it always did.
func TestAuthenticateFlagsOptional(t *testing.T) {
	plain, _ := (&wire.AuthenticateRequest{Token: "t"}).Encode(nil)
	flagged, err := (&wire.AuthenticateRequest{Token: "t", Flags: wire.AuthReadsRetryAfter}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(flagged) != len(plain)+1 {
		t.Fatalf("flags take %d bytes, want 1", len(flagged)-len(plain))
	}
	var m wire.AuthenticateRequest
	if err := m.Decode(flagged); err != nil || m.Flags != wire.AuthReadsRetryAfter {
		t.Fatalf("decode: %+v, %v", m, err)
	}
	if err := m.Decode(plain); err != nil || m.Flags != 0 {
		t.Fatalf("decode without flags: %+v, %v", m, err)
	}
}

func parse(t *testing.T, frame []byte) wire.Frame {
	t.Helper()
	h, n, err := wire.ParseFrameHeader(frame, len(frame))
	if err != nil || n != len(frame)-wire.FrameHeaderSize {
		t.Fatalf("frame: %v", err)
	}
	return wire.Frame{FrameHeader: h, Body: frame[wire.FrameHeaderSize:]}
}
