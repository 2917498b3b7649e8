package quic

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
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

// TestShutdownDoesNotWaitForHalfSentFrame: a client that vanished in the
// middle of a frame (its header arrived, the rest never will, as when a
// process is killed between two packets) holds nothing up either: the
// server stops waiting for the rest after the linger, and Shutdown returns
// on its own, with no deadline in its context.
func TestShutdownDoesNotWaitForHalfSentFrame(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	relay := newUDPRelay(t, ts.addr())

	c, err := Dial(testContext(t), relay.addr(), ts.clientTLS(), ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustEcho(t, pipeline(t, c, 4), "an earlier stream was served")
	s, err := c.OpenStream(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	f := frame("a request whose second half is never sent")
	if _, err := s.bw.Write(f[:len(f)/2]); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server reading the frame's body", func() bool {
		return ts.ln.readingBody()
	})

	relay.cut() // the client vanishes mid-frame
	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.ln.Shutdown(context.Background()) }()
	if err := wait(t, shutdown, "Shutdown with a half-sent frame"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// readingBody reports whether a stream of the listener has read a frame's
// header and waits for its body.
func (l *Listener) readingBody() bool {
	l.mu.Lock()
	conns := make([]*Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		for _, s := range c.snapshotStreams() {
			s.mu.Lock()
			body := s.reading && !s.inHeader
			s.mu.Unlock()
			if body {
				return true
			}
		}
	}
	return false
}

// waitFor polls cond until it holds (or the safety timeout passes).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(safety); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestShutdownDoesNotWaitForReplyToVanishedClient: a reply larger than
// what the client allowed in flight (its flow-control window), written
// after the client vanished, can never be sent in full: the writer waits
// for credit that never comes. Shutdown takes the client as gone when it
// hears nothing from it for a linger while a reply waits, and returns on
// its own, with no deadline in its context.
func TestShutdownDoesNotWaitForReplyToVanishedClient(t *testing.T) {
	ts := newTestServer(t, Config{})
	release := make(chan struct{})
	ts.serve(t, func(s *Stream, r *Request) {
		<-release
		big := make([]byte, 4<<20) // beyond the client's initial window
		f, err := wire.AppendFrame(nil, wire.FrameHeader{Version: wire.ProtocolVersion, Kind: wire.KindPoll}, big)
		if err != nil {
			panic(err)
		}
		_ = s.Reply(r, f)
	})
	relay := newUDPRelay(t, ts.addr())

	c, err := Dial(testContext(t), relay.addr(), ts.clientTLS(), ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.OpenStream(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFrame(frame("a poll whose reply is large")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the request in flight", func() bool { return ts.ln.Stats().RequestsInFlight == 1 })

	relay.cut() // the client vanishes before its reply
	close(release)
	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.ln.Shutdown(context.Background()) }()
	if err := wait(t, shutdown, "Shutdown with a reply to a vanished client"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
