package quic

import (
	"crypto/tls"
	"testing"
	"time"
)

// TestCrashedNodesSuccessorResetsTheConnection: a node dies without a word
// (its socket closes, as in a SIGKILL) and its successor listens on the
// same port with the same stateless reset key. The client's next request,
// however small (a bare frame header), meets the successor, which answers
// with a stateless reset: the request fails as a reset connection at once,
// rather than waiting for a reply that never comes.
func TestCrashedNodesSuccessorResetsTheConnection(t *testing.T) {
	cfg := authConfig()
	cfg.StatelessResetKey = &[32]byte{7}
	ts := newTestServer(t, cfg)
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 1)
	if _, err := do(t, p, "token:alice"); err != nil {
		t.Fatal(err)
	}
	mustEcho(t, p, "before the crash")
	// The client idles: its acknowledgement of the reply goes out on its
	// own (within the 25 ms ACK delay), not in the packet of the request.
	time.Sleep(200 * time.Millisecond)

	addr := ts.addr()
	_ = ts.ln.sock.Close() // the node's connections end without a CONNECTION_CLOSE
	conf := ServerTLSConfig(nil)
	conf.Certificates = []tls.Certificate{ts.eph.Server}
	successor, err := Listen(addr, conf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer successor.Close()

	_, err = p.Do(testContext(t), frame(""))
	if !IsConnectionReset(err) {
		t.Fatalf("the first request after the crash: %v, want a reset connection", err)
	}
	// The request fails as soon as its stream does; the connection's
	// context ends a moment later.
	select {
	case <-c.Context().Done():
	case <-testContext(t).Done():
		t.Fatal("the connection outlived the reset")
	}
	if !IsConnectionReset(c.Err()) {
		t.Fatalf("the connection: %v, want a reset connection", c.Err())
	}
}
