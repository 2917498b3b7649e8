package ceiling

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The one-at-a-time round trip: a message of RoundTripMsg bytes (a
// sync-1k produce's payload) towards the server, read whole there and
// answered with RoundTripReply bytes (about a produce's reply), the next
// message once the reply is in.
const (
	RoundTripMsg   = 1024
	RoundTripReply = 32
)

// RoundTripALPN is the protocol a client names to have cmd/rawsink
// answer its messages (Answer) rather than discard them: over QUIC and
// over TLS on TCP alike.
const RoundTripALPN = "ledge-bench-rtt"

// RoundTrip is the latency of one-at-a-time round trips, in µs.
type RoundTrip struct {
	N      int64 `json:"round_trips"`
	P50us  int64 `json:"p50_us"`
	P99us  int64 `json:"p99_us"`
	P999us int64 `json:"p999_us"`
}

// Answer is the far end of the round trip: it reads RoundTripMsg bytes
// whole from rw and writes RoundTripReply bytes back, until the client
// ends its side (nil) or something fails.
func Answer(rw io.ReadWriter) error {
	msg := make([]byte, RoundTripMsg)
	reply := make([]byte, RoundTripReply)
	for {
		if _, err := io.ReadFull(rw, msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if _, err := rw.Write(reply); err != nil {
			return err
		}
	}
}

// RoundTrips measures one-at-a-time round trips to a rawsink at addr:
// for warmup unrecorded, then for d into an HDR histogram, each from the
// write of the message to the last byte of the reply. proto "quic" is a
// raw quic-go stream as the stream ceilings dial it (Ledge's socket and
// client windows, TLS 1.3); "tls" is TLS 1.3 over TCP (Nagle off, as Go
// dials it), the transport JetStream TLS runs on. Neither checks the
// sink's throwaway certificate.
func RoundTrips(ctx context.Context, proto, addr string, warmup, d time.Duration) (RoundTrip, error) {
	var rw io.ReadWriter
	switch proto {
	case "quic":
		c, s, err := dialRaw(ctx, addr, false, RoundTripALPN)
		if err != nil {
			return RoundTrip{}, err
		}
		defer c.CloseWithError(0, "")
		defer context.AfterFunc(ctx, func() { c.CloseWithError(0, "") })()
		rw = s
	case "tls":
		conf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{RoundTripALPN}, MinVersion: tls.VersionTLS13}
		c, err := (&tls.Dialer{Config: conf}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return RoundTrip{}, err
		}
		defer c.Close()
		defer context.AfterFunc(ctx, func() { c.Close() })()
		rw = c
	default:
		return RoundTrip{}, fmt.Errorf("ceiling: unknown protocol %q", proto)
	}
	msg := make([]byte, RoundTripMsg)
	for i := range msg {
		msg[i] = byte(i)
	}
	reply := make([]byte, RoundTripReply)
	phase := func(d time.Duration, h *hdrhistogram.Histogram) error {
		start := time.Now()
		for time.Since(start) < d {
			if err := ctx.Err(); err != nil {
				return context.Cause(ctx)
			}
			t := time.Now()
			if _, err := rw.Write(msg); err != nil {
				return err
			}
			if _, err := io.ReadFull(rw, reply); err != nil {
				return err
			}
			_ = h.RecordValue(max(time.Since(t).Microseconds(), 1))
		}
		return nil
	}
	// The histogram of the sync-1k runs (internal/loadgen).
	newHist := func() *hdrhistogram.Histogram { return hdrhistogram.New(1, 120_000_000, 3) }
	if err := phase(warmup, newHist()); err != nil {
		return RoundTrip{}, fmt.Errorf("warm-up: %w", err)
	}
	h := newHist()
	if err := phase(d, h); err != nil {
		return RoundTrip{}, err
	}
	return RoundTrip{N: h.TotalCount(), P50us: h.ValueAtQuantile(50), P99us: h.ValueAtQuantile(99), P999us: h.ValueAtQuantile(99.9)}, nil
}
