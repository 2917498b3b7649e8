package quic

import (
	"errors"
	"net"
	"testing"
	"time"
)

// Both ends read their datagrams through yieldingConn: quic-go takes the
// batch reader it offers, so the connection handles each batch before the
// next is read.
func TestBothEndsReadThroughTheYieldingSocket(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 1)
	if got, err := do(t, p, "ping"); err != nil || got != "echo:ping" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	if n := c.sock.batches.Load(); n == 0 {
		t.Error("the client's socket was never read in batches: quic-go read it some other way")
	}
	if n := ts.ln.sock.batches.Load(); n == 0 {
		t.Error("the node's socket was never read in batches: quic-go read it some other way")
	}
}

// A client connection's socket is its own: it is closed once the
// connection is, and no socket is left behind per connection made.
func TestClientSocketClosedWithItsConnection(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(safety)
	for {
		err := c.sock.SetReadDeadline(time.Time{})
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the socket of a closed connection is still open (%v)", err)
		}
		time.Sleep(time.Millisecond)
	}
}
