package quic

import (
	"crypto/tls"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

// TestDialReachesANodeThatComesBack: a Dial begun while nothing listens at
// the address (a node restarting) connects once a node listens there, and
// the connection serves requests; the attempts that lost are closed.
func TestDialReachesANodeThatComesBack(t *testing.T) {
	addr := unassignedPort(t)
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

// unassignedPort returns a loopback address whose UDP port is free and
// below the kernel's ephemeral range, so that no socket bound to port 0
// (another package's test, running at the same time) is given it while
// the test leaves it unbound. Where the range cannot be read, any free
// port will do.
func unassignedPort(t *testing.T) string {
	t.Helper()
	low := 0
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			low, _ = strconv.Atoi(f[0])
		}
	}
	for port := low - 1; port > 1024 && port > low-4000; port-- {
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := pc.LocalAddr().String()
		_ = pc.Close()
		return addr
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	_ = pc.Close()
	return addr
}
