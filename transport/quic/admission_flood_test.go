package quic

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"
)

var fullFlood = flag.Bool("admission.full", false, "flood the listener with 2,000 abandoned dials per scenario instead of a few hundred")

// TestHonestClientsConnectThroughAFlood floods a listener with dials that
// never authenticate — some complete the QUIC handshake and then say
// nothing, some send their first flight and vanish — at 30 per second and
// as fast as the machine allows, from one source address and from many,
// while honest clients with a valid token dial one after another from
// another address. Every honest client must connect and authenticate.
//
// The authentication deadline is an hour here: only the admission's bounds
// make room, never a timer, so what the test counts does not depend on how
// fast the machine is. All traffic stays on loopback (127.0.0.0/8).
func TestHonestClientsConnectThroughAFlood(t *testing.T) {
	paced, fast := 90, 300
	if testing.Short() {
		paced, fast = 45, 150
	}
	if *fullFlood {
		paced, fast = 2000, 2000
	}

	for _, sc := range []struct {
		name    string
		dials   int
		perSec  int // 0: as fast as dials complete
		sources int
		kind    floodKind
	}{
		{"30 per second, handshaken", paced, 30, 1, handshaken},
		{"30 per second, half-open", paced, 30, 1, halfOpen},
		{"full speed, one source", fast, 0, 1, mixed},
		{"full speed, 16 sources", fast, 0, 16, mixed},
	} {
		t.Run(sc.name, func(t *testing.T) {
			cfg := authConfig()
			cfg.AuthTimeout = time.Hour
			cfg.MaxUnauthenticated = 64
			ts := newTestServer(t, cfg)
			ts.serve(t, echo)

			// The flood's own bound: its dials take at most a second each.
			ctx, stop := context.WithTimeout(context.Background(), safety+time.Duration(sc.dials)*time.Second)
			var honest honestCount
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ctx.Err() == nil || i < 5; i++ {
					honest.try(t, ts, i)
				}
			}()
			f := newFlood(t, ts, sc.sources)
			f.run(ctx, sc.dials, sc.perSec, sc.kind)
			stop()
			<-done
			f.close()

			st := ts.ln.Stats()
			t.Logf("%d abandoned dials: %d handshaken, %d refused or unanswered; listener: %d evicted, %d refused (%d by source rate), %d Retry demanded; honest: %d of %d",
				sc.dials, f.handshaken.Load(), f.failed.Load(), st.Evicted, st.ConnsRefused, st.RefusedSource, st.RetriesDemanded, honest.ok.Load(), honest.tries.Load())
			if n, ok := honest.tries.Load(), honest.ok.Load(); ok != n {
				t.Errorf("%d of %d honest clients failed to connect; first failure: %v", n-ok, n, honest.firstErr())
			}
			if st.Unauthenticated > cfg.MaxUnauthenticated {
				t.Errorf("%d unauthenticated connections held, over the bound of %d", st.Unauthenticated, cfg.MaxUnauthenticated)
			}
		})
	}
}

type honestCount struct {
	tries, ok atomic.Int64
	mu        sync.Mutex
	err       error
}

// try dials, authenticates with a valid token and hangs up.
func (h *honestCount) try(t *testing.T, ts *testServer, i int) {
	h.tries.Add(1)
	err := func() error {
		c, err := Dial(testContext(t), ts.addr(), ts.clientTLS(), ClientConfig{})
		if err != nil {
			return err
		}
		defer c.Close()
		s, err := c.OpenStream(testContext(t))
		if err != nil {
			return err
		}
		reply, err := NewPipeline(s, 1).Do(testContext(t), frame(fmt.Sprintf("token:honest-%d", i)))
		if err != nil {
			return err
		}
		if got, want := bodyOf(reply), fmt.Sprintf("welcome honest-%d", i); got != want {
			return fmt.Errorf("reply %q, want %q", got, want)
		}
		return nil
	}()
	if err == nil {
		h.ok.Add(1)
		return
	}
	h.mu.Lock()
	if h.err == nil {
		h.err = err
	}
	h.mu.Unlock()
}

func (h *honestCount) firstErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

type floodKind int

const (
	handshaken floodKind = iota // completes the handshake, never authenticates
	halfOpen                    // sends its first flight and vanishes
	mixed                       // one of each, in turn
)

// flood dials the listener from the loopback addresses 127.0.0.2 and up
// (the honest clients dial from 127.0.0.1) and abandons every dial.
type flood struct {
	t       *testing.T
	addr    *net.UDPAddr
	tlsConf *tls.Config
	sources []*quicgo.Transport // one socket per source, for handshaken dials

	mu    sync.Mutex
	conns []*quicgo.Conn

	handshaken, failed atomic.Int64
}

func newFlood(t *testing.T, ts *testServer, sources int) *flood {
	t.Helper()
	f := &flood{t: t, addr: ts.ln.Addr().(*net.UDPAddr), tlsConf: enforceTLS(ts.clientTLS())}
	for i := range sources {
		sock, err := net.ListenUDP("udp", f.source(i))
		if err != nil {
			// Linux routes all of 127.0.0.0/8 to loopback; others may not.
			t.Skipf("the flood needs loopback addresses besides 127.0.0.1: %v", err)
		}
		f.sources = append(f.sources, &quicgo.Transport{Conn: sock})
	}
	return f
}

func (f *flood) source(i int) *net.UDPAddr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%250))}
}

// run makes n dials, perSec a second or as fast as 64 at a time complete.
func (f *flood) run(ctx context.Context, n, perSec int, kind floodKind) {
	var tick <-chan time.Time
	if perSec > 0 {
		ticker := time.NewTicker(time.Second / time.Duration(perSec))
		defer ticker.Stop()
		tick = ticker.C
	}
	slots := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		if tick != nil {
			<-tick
		}
		slots <- struct{}{}
		k := kind
		if k == mixed {
			k = floodKind(i % 2)
		}
		wg.Go(func() {
			defer func() { <-slots }()
			f.dial(ctx, i%len(f.sources), k)
		})
	}
	wg.Wait()
}

// dial makes one abandoned dial. A refused dial, or one whose answer was
// dropped, gives up after a second.
func (f *flood) dial(ctx context.Context, source int, kind floodKind) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if kind == halfOpen {
		f.halfOpen(ctx, source)
		return
	}
	qc, err := f.sources[source].Dial(ctx, f.addr, f.tlsConf, &quicgo.Config{})
	if err != nil {
		f.failed.Add(1)
		return
	}
	f.handshaken.Add(1)
	f.mu.Lock()
	f.conns = append(f.conns, qc)
	f.mu.Unlock()
}

// halfOpen sends a first flight from a socket of its own and stops
// answering as soon as the listener answers.
func (f *flood) halfOpen(ctx context.Context, source int) {
	sock, err := net.ListenUDP("udp", f.source(source))
	if err != nil {
		f.t.Errorf("socket: %v", err)
		return
	}
	deaf := &deafConn{PacketConn: sock, heard: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-deaf.heard:
			cancel()
		case <-ctx.Done():
		}
	}()
	tr := &quicgo.Transport{Conn: deaf}
	if _, err := tr.Dial(ctx, f.addr, f.tlsConf, &quicgo.Config{}); err == nil {
		f.t.Error("a half-open dial completed its handshake")
	}
	f.failed.Add(1)
	_ = tr.Close()
	_ = sock.Close()
}

func (f *flood) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, qc := range f.conns {
		_ = qc.CloseWithError(0, "")
	}
	for _, tr := range f.sources {
		_ = tr.Close()
		_ = tr.Conn.Close()
	}
}

// deafConn sends until the first datagram arrives, then neither delivers
// what arrives nor sends anything more: a client that vanished after its
// first flight.
type deafConn struct {
	net.PacketConn // only the interface: quic-go must not find the UDP socket's own methods
	once           sync.Once
	heard          chan struct{}
	deaf           atomic.Bool
}

func (c *deafConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		if _, _, err := c.PacketConn.ReadFrom(p); err != nil {
			return 0, nil, err
		}
		c.deaf.Store(true)
		c.once.Do(func() { close(c.heard) })
	}
}

func (c *deafConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	if c.deaf.Load() {
		return len(p), nil
	}
	return c.PacketConn.WriteTo(p, addr)
}
