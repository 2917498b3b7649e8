package quic

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

// TestDialReachesANodeThatComesBack: a Dial begun while nothing listens at
// the address (a node restarting) connects once a node listens there, and
// the connection serves requests; the attempts that lost are closed.
func TestDialReachesANodeThatComesBack(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	_ = pc.Close()
	eph, err := certs.NewEphemeral("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}

	dialed := make(chan *ClientConn, 1)
	failed := make(chan error, 1)
	go func() {
		c, err := Dial(testContext(t), addr, ClientTLSConfig(eph.CA.Pool(), ""), ClientConfig{})
		if err != nil {
			failed <- err
			return
		}
		dialed <- c
	}()
	// Long enough for several attempts to be under way, with their first
	// packets' retransmissions backing off.
	time.Sleep(time.Second)

	conf := ServerTLSConfig(nil)
	conf.Certificates = []tls.Certificate{eph.Server}
	ln, err := Listen(addr, conf, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	ts := &testServer{ln: ln, eph: eph}
	ts.serve(t, echo)

	var c *ClientConn
	select {
	case c = <-dialed:
	case err := <-failed:
		t.Fatalf("Dial: %v", err)
	case <-time.After(safety):
		t.Fatal("Dial did not connect")
	}
	defer c.Close()
	mustEcho(t, pipeline(t, c, 1), "back")
}
