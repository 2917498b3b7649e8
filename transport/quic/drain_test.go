package quic

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
)

// TestShutdownDoesNotWaitForVanishedClients: clients that went away
// without closing (their packets stop, as when a process is killed) hold
// nothing up: one with an idle stream still open, one whose last request
// closed its side before the reply. Shutdown returns on its own, with no
// deadline in its context, and cleanly.
func TestShutdownDoesNotWaitForVanishedClients(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	relay := newUDPRelay(t, ts.addr())

	open, err := Dial(testContext(t), relay.addr(), ts.clientTLS(), ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	mustEcho(t, pipeline(t, open, 4), "the stream stays open")

	halfClosed, err := Dial(testContext(t), relay.addr(), ts.clientTLS(), ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer halfClosed.Close()
	s, err := halfClosed.OpenStream(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFrame(frame("one request, then the end")); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(t, s); err != nil || len(got) != 1 {
		t.Fatalf("reply: %v %v", got, err)
	}

	relay.cut() // both clients vanish
	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.ln.Shutdown(context.Background()) }()
	if err := wait(t, shutdown, "Shutdown with vanished clients"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// udpRelay forwards datagrams between one client and a server until cut,
// then drops them all: the client has vanished as far as the server can
// tell.
type udpRelay struct {
	pc     net.PacketConn
	server *net.UDPAddr
	dead   atomic.Bool
}

func newUDPRelay(t *testing.T, server string) *udpRelay {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	saddr, err := net.ResolveUDPAddr("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	r := &udpRelay{pc: pc, server: saddr}
	go r.run()
	return r
}

func (r *udpRelay) addr() string { return r.pc.LocalAddr().String() }

func (r *udpRelay) cut() { r.dead.Store(true) }

func (r *udpRelay) run() {
	clients := map[string]*net.UDPConn{} // client address -> socket facing the server
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if r.dead.Load() {
			continue
		}
		up, ok := clients[from.String()]
		if !ok {
			up, err = net.DialUDP("udp", nil, r.server)
			if err != nil {
				return
			}
			clients[from.String()] = up
			go r.back(up, from)
		}
		_, _ = up.Write(buf[:n])
	}
}

// back forwards the server's datagrams on up to the client at to.
func (r *udpRelay) back(up *net.UDPConn, to net.Addr) {
	defer up.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if err != nil {
			return
		}
		if r.dead.Load() {
			continue
		}
		_, _ = r.pc.WriteTo(buf[:n], to)
	}
}
