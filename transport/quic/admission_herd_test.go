package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

// A crowd dials at once and the node takes their handshakes up late: it
// refuses the next connections before any TLS work (and without a Retry
// first, which would cost the client a round trip for nothing), keeping
// no place for them, until a window passes in which it took up no
// handshake: its queue is gone, and it admits again.
func TestAdmissionRefusesWhileHandshakesWait(t *testing.T) {
	a, clock := testAdmission(admissionLimits{maxAuthenticated: 100, maxUnauthenticated: 100, handshakeWait: 250 * time.Millisecond})
	crowd := make([]*ticket, 5)
	for i := range crowd {
		crowd[i] = mustAdmit(t, a, fmt.Sprintf("192.0.2.%d", i+1))
	}
	clock.Advance(300 * time.Millisecond)
	for _, tk := range crowd[:3] {
		a.handshakeStarted(tk, 0) // each waited 300 ms
	}
	clock.Advance(handshakeWindow)
	if a.demandRetry(from("198.51.100.1")) {
		t.Error("a Retry demanded of a connection the node refuses anyway")
	}
	if _, err := a.admit(from("198.51.100.1")); !errors.Is(err, errHandshakes) {
		t.Fatalf("a dial while every handshake waited 300 ms: %v, want errHandshakes", err)
	}
	if s := a.snapshot(); s.refusedHandshakes != 1 || s.unauthenticated != 5 || s.handshakeWait != 300*time.Millisecond {
		t.Errorf("stats %+v, want 1 refused, the crowd's 5 places held, a wait of 300 ms", s)
	}

	// The rest of the crowd is taken up, later still.
	for _, tk := range crowd[3:] {
		a.handshakeStarted(tk, 0)
	}
	clock.Advance(handshakeWindow)
	if _, err := a.admit(from("198.51.100.1")); !errors.Is(err, errHandshakes) {
		t.Fatalf("a dial while the crowd's last handshakes waited 400 ms: %v, want errHandshakes", err)
	}

	// A window in which the node took up no handshake: nothing waits.
	clock.Advance(handshakeWindow)
	late := mustAdmit(t, a, "198.51.100.1")
	a.handshakeStarted(late, 0) // at once
	clock.Advance(handshakeWindow)
	mustAdmit(t, a, "198.51.100.2")
	if s := a.snapshot(); s.refusedHandshakes != 2 || s.handshakeWait != 0 {
		t.Errorf("stats %+v, want 2 refused and no wait", s)
	}
}

// One slow client (its ClientHello's second packet long after the first)
// does not make the node refuse others: a window's least wait is what
// counts, and the handshakes of others waited little.
func TestAdmissionHandshakeWaitIsTheLeastOfAWindow(t *testing.T) {
	a, clock := testAdmission(admissionLimits{maxAuthenticated: 100, maxUnauthenticated: 100, handshakeWait: 250 * time.Millisecond})
	slow := mustAdmit(t, a, "192.0.2.1")
	clock.Advance(2 * time.Second)
	fast := mustAdmit(t, a, "192.0.2.2")
	clock.Advance(5 * time.Millisecond)
	a.handshakeStarted(slow, 0)
	a.handshakeStarted(fast, 0)
	clock.Advance(handshakeWindow)
	mustAdmit(t, a, "192.0.2.3")
	if w := a.snapshot().handshakeWait; w != 5*time.Millisecond {
		t.Errorf("handshake wait %v, want the fast one's 5 ms", w)
	}
}

// The node does not do the TLS work of a handshake that would be
// wasted: one whose connection lost its place while it waited (evicted
// by a newer one), or that waited past its share of the handshake
// timeout. Its client is told as if refused, and comes back later.
func TestAdmissionFailsHandshakesThatWouldBeWasted(t *testing.T) {
	a, clock := testAdmission(admissionLimits{maxAuthenticated: 100, maxUnauthenticated: 1})
	pushedOut := mustAdmit(t, a, "192.0.2.1")
	newer := mustAdmit(t, a, "192.0.2.2")
	if err := a.handshakeStarted(pushedOut, 5*time.Second); !errors.Is(err, errEvicted) {
		t.Errorf("the handshake of an evicted connection: %v, want errEvicted", err)
	}
	clock.Advance(6 * time.Second)
	if err := a.handshakeStarted(newer, 5*time.Second); !errors.Is(err, errHandshakes) {
		t.Errorf("a handshake taken up after 6 s, with 5 s left for it: %v, want errHandshakes", err)
	}
	if s := a.snapshot(); s.evicted != 1 || s.refusedHandshakes != 1 {
		t.Errorf("stats %+v, want 1 evicted and 1 refused", s)
	}
	onTime := mustAdmit(t, a, "192.0.2.3")
	if err := a.handshakeStarted(onTime, 5*time.Second); err != nil {
		t.Errorf("a handshake taken up at once: %v", err)
	}

	// What the client of such a handshake is told, it takes as a refusal.
	for _, code := range []quicgo.TransportErrorCode{tlsInternalError, quicgo.ApplicationErrorErrorCode, quicgo.ConnectionRefused} {
		if err := mapError(&quicgo.TransportError{Remote: true, ErrorCode: code}); !errors.Is(err, ErrConnectionRefused) || !IsRetryable(err) {
			t.Errorf("the node closing a handshake with %v: %v, want a retryable ErrConnectionRefused", code, err)
		}
	}
}

// A listener behind with its handshakes refuses the next dial before any
// TLS work, with the error clients retry later on; once it has taken up
// no handshake for a window, the dial connects.
func TestListenerBehindWithHandshakesRefusesDials(t *testing.T) {
	eph, err := certs.NewEphemeral("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	conf := ServerTLSConfig(nil)
	conf.Certificates = []tls.Certificate{eph.Server}
	clock := &fakeClock{now: time.Now()}
	ln, err := listen("127.0.0.1:0", conf, Config{HandshakeWaitTarget: 250 * time.Millisecond}, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	ts := &testServer{ln: ln, eph: eph}

	// The listener sees when it takes a handshake up.
	ts.dial(t, ClientConfig{}).Close()
	ln.adm.mu.Lock()
	took := ln.adm.hs.n
	ln.adm.mu.Unlock()
	if took != 1 {
		t.Fatalf("%d handshakes taken up after one dial, want 1", took)
	}

	// A later window: the node takes up a handshake that waited a second
	// for it, behind a crowd.
	clock.Advance(2 * handshakeWindow)
	_ = ln.adm.handshakeStarted(&ticket{admitted: clock.Now().Add(-time.Second)}, 0)
	clock.Advance(handshakeWindow)
	_, err = Dial(testContext(t), ts.addr(), ts.clientTLS(), ClientConfig{})
	if !errors.Is(err, ErrConnectionRefused) || !IsRetryable(err) {
		t.Fatalf("Dial of a node behind with its handshakes: %v, want a retryable ErrConnectionRefused", err)
	}
	// Each of the dial's first packets (a ClientHello may take two) is
	// refused alike.
	if st := ln.Stats(); st.RefusedHandshakes == 0 || st.ConnsRefused != st.RefusedHandshakes || st.HandshakeWait != time.Second || st.RetriesDemanded != 0 {
		t.Errorf("stats: %d refused for handshakes of %d, wait %v, %d Retries; want all refusals for handshakes, 1s, no Retry",
			st.RefusedHandshakes, st.ConnsRefused, st.HandshakeWait, st.RetriesDemanded)
	}

	clock.Advance(2 * handshakeWindow)
	ts.dial(t, ClientConfig{}).Close()
}

// A node that answers but does not finish the handshake (here, anything
// at all: the client's socket hears it) is not sent fresh attempts, each
// a handshake more for it to do; a silent address is, in case a node is
// starting there. Each attempt has a socket, so a source port, of its
// own.
func TestDialSendsNoFreshAttemptsToANodeThatAnswers(t *testing.T) {
	eph, err := certs.NewEphemeral("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		answers bool
	}{{"answering", true}, {"silent", false}} {
		t.Run(tc.name, func(t *testing.T) {
			node, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer node.Close()
			ports := make(chan map[string]bool, 1)
			go func() {
				seen := map[string]bool{}
				buf := make([]byte, 2048)
				for {
					_, from, err := node.ReadFrom(buf)
					if err != nil {
						ports <- seen
						return
					}
					seen[from.String()] = true
					if tc.answers {
						_, _ = node.WriteTo([]byte{0}, from) // not QUIC: dropped, but heard
					}
				}
			}()
			// Time for four attempts to start.
			dctx, cancel := context.WithTimeout(testContext(t), 4*dialAttemptEvery+dialAttemptEvery/2)
			defer cancel()
			if _, err := Dial(dctx, node.LocalAddr().String(), ClientTLSConfig(eph.CA.Pool(), ""), ClientConfig{}); err == nil {
				t.Fatal("Dial connected to a socket that speaks no QUIC")
			}
			node.Close()
			seen := <-ports
			switch {
			case tc.answers && len(seen) != 1:
				t.Errorf("a node that answers got %d attempts, want 1", len(seen))
			case !tc.answers && len(seen) < 2:
				t.Errorf("a silent address got %d attempts, want fresh ones", len(seen))
			}
		})
	}
}
