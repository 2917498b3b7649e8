package quic

import (
	"testing"
)

// Connections dialed over one Transport share its socket: each is served
// on its own, and closing one leaves the others working.
func TestConnectionsShareATransport(t *testing.T) {
	ts := newTestServer(t, Config{SourceHandshakeRate: -1})
	ts.serve(t, echo)
	tr, err := NewTransport("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	var conns []*ClientConn
	for range 3 {
		c := ts.dial(t, ClientConfig{Transport: tr})
		if c.LocalAddr().String() != tr.LocalAddr().String() {
			t.Fatalf("a connection dialed over the transport is on %s, the transport's socket is %s", c.LocalAddr(), tr.LocalAddr())
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		mustEcho(t, pipeline(t, c, 1), numbered(i))
	}
	if err := conns[0].Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range conns[1:] {
		mustEcho(t, pipeline(t, c, 1), numbered(10+i))
	}
}
