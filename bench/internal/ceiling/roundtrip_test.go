package ceiling

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

// TestAnswerRepliesToEachWholeMessage: the far end answers a message
// only once all of it has come, however it is cut up on the way, and
// ends quietly when the client ends its side.
func TestAnswerRepliesToEachWholeMessage(t *testing.T) {
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- Answer(server) }()
	msg := make([]byte, RoundTripMsg)
	for range 3 {
		if _, err := client.Write(msg[:100]); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Write(msg[100:]); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, RoundTripReply)
		if _, err := io.ReadFull(client, reply); err != nil {
			t.Fatal(err)
		}
	}
	client.Close()
	if err := <-done; err != nil {
		t.Fatalf("Answer after the client closed: %v", err)
	}
}

// TestRoundTripsOverTLS: a client naming the round trip's protocol gets
// its answers over TLS 1.3 on TCP, and the measurement reports how many
// round trips it timed and their percentiles, in order.
func TestRoundTripsOverTLS(t *testing.T) {
	eph, err := certs.NewEphemeral("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS13,
		Certificates: []tls.Certificate{eph.Server}, NextProtos: []string{RoundTripALPN}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = Answer(c)
	}()
	rt, err := RoundTrips(context.Background(), "tls", ln.Addr().String(), 10*time.Millisecond, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if rt.N == 0 || rt.P50us <= 0 || rt.P50us > rt.P99us || rt.P99us > rt.P999us {
		t.Fatalf("round trips %+v: want some, with p50 ≤ p99 ≤ p99.9", rt)
	}
}
