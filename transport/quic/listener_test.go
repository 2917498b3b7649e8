package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

func TestHandshake(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	state := c.TLS()
	if state.NegotiatedProtocol != ALPN {
		t.Errorf("ALPN %q, want %q", state.NegotiatedProtocol, ALPN)
	}
	if state.Version != tls.VersionTLS13 {
		t.Errorf("TLS version %x, want 1.3", state.Version)
	}
	mustEcho(t, pipeline(t, c, 1), "hello")
}

func TestHandshakeRefused(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)

	t.Run("ALPN mismatch", func(t *testing.T) {
		conf := ts.clientTLS()
		conf.NextProtos = []string{"h3"}
		_, err := quicgo.DialAddr(testContext(t), ts.addr(), conf, nil)
		if err == nil {
			t.Fatal("a client offering another ALPN was accepted")
		}
		var te *quicgo.TransportError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "application protocol") {
			t.Errorf("err = %v, want a TLS no_application_protocol alert", err)
		}
	})
	t.Run("untrusted CA", func(t *testing.T) {
		other, err := certs.NewEphemeral()
		if err != nil {
			t.Fatal(err)
		}
		_, err = Dial(testContext(t), ts.addr(), ClientTLSConfig(other.CA.Pool(), ""), ClientConfig{})
		if err == nil {
			t.Fatal("a server certificate from an untrusted CA was accepted")
		}
	})
	t.Run("wrong name", func(t *testing.T) {
		_, err := Dial(testContext(t), ts.addr(), ClientTLSConfig(ts.eph.CA.Pool(), "elsewhere.example"), ClientConfig{})
		if err == nil {
			t.Fatal("a certificate for other names was accepted")
		}
	})
}

func TestHandshakeWithStore(t *testing.T) {
	store, err := certs.Open(certs.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", ServerTLSConfig(store.GetCertificate), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ts := &testServer{ln: ln}
	ts.serve(t, echo)
	conf, err := ClientTLSConfigFromCAFile(store.Paths().CA, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(testContext(t), ln.Addr().String(), conf, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustEcho(t, pipeline(t, c, 1), "over the stored certificates")
}

// authConfig accepts the frame "token:<id>" for ids that do not start with
// "bad", and closes the connection otherwise.
func authConfig() Config {
	return Config{Authenticate: func(_ context.Context, req AuthRequest) (Identity, []byte, error) {
		id, ok := strings.CutPrefix(bodyOf(req.Frame), "token:")
		if !ok || strings.HasPrefix(id, "bad") {
			return Identity{}, nil, errors.New("unknown token")
		}
		return Identity{TokenID: id, Value: "principal " + id}, frame("welcome " + id), nil
	}}
}

func TestAuthentication(t *testing.T) {
	ts := newTestServer(t, authConfig())
	identities := make(chan Identity, 4)
	ctx := testContext(t)
	go func() {
		for {
			c, err := ts.ln.Accept(ctx)
			if err != nil {
				return
			}
			identities <- c.Identity()
			go serveConn(ctx, c, echo, &sync.WaitGroup{})
		}
	}()

	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 4)
	got, err := do(t, p, "token:alice")
	if err != nil || got != "welcome alice" {
		t.Fatalf("auth reply %q, %v", got, err)
	}
	if id := wait(t, identities, "an accepted connection"); id.TokenID != "alice" || id.Value != "principal alice" {
		t.Errorf("identity %+v", id)
	}
	// The authentication stream goes on carrying requests, and so do others.
	mustEcho(t, p, "after auth")
	mustEcho(t, pipeline(t, c, 1), "second stream")

	bad := ts.dial(t, ClientConfig{})
	_, err = do(t, pipeline(t, bad, 1), "token:bad-guy")
	if !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("err = %v, want ErrUnauthenticated", err)
	}
	var ce *CloseError
	if !errors.As(err, &ce) || !ce.Remote || !strings.Contains(ce.Reason, "unknown token") {
		t.Errorf("close error %+v, want the node's reason", ce)
	}
	if IsRetryable(err) {
		t.Error("a refused authentication is reported as retryable")
	}
	// A stream can see the node's close before quic-go ends the
	// connection's context; Err reports it once the context has ended.
	wait(t, bad.Context().Done(), "the refused connection to end")
	if !errors.Is(bad.Err(), ErrUnauthenticated) {
		t.Errorf("ClientConn.Err() = %v", bad.Err())
	}
	if n := ts.ln.Stats().AuthFailures; n != 1 {
		t.Errorf("AuthFailures = %d, want 1", n)
	}
}

func TestAuthenticationTimeout(t *testing.T) {
	cfg := authConfig()
	cfg.AuthTimeout = 50e6 // 50 ms: the client below never authenticates
	ts := newTestServer(t, cfg)
	c := ts.dial(t, ClientConfig{})
	select {
	case <-c.Context().Done():
	case <-testContext(t).Done():
		t.Fatal("the server kept a connection that never authenticated")
	}
	if err := c.Err(); !errors.Is(err, ErrAuthTimeout) || !IsRetryable(err) {
		t.Errorf("err = %v, want a retryable ErrAuthTimeout", err)
	}
}

func TestTokenRevocation(t *testing.T) {
	ts := newTestServer(t, authConfig())
	ts.serve(t, echo)
	login := func(token string) *Pipeline {
		p := pipeline(t, ts.dial(t, ClientConfig{}), 4)
		if _, err := do(t, p, "token:"+token); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a1, a2, b := login("a"), login("a"), login("b")
	// Accept has run for all three once their replies came back; the
	// registry is filled before Accept hands a connection out.
	if n := ts.ln.CloseToken("a", "token a revoked"); n != 2 {
		t.Fatalf("CloseToken closed %d connections, want 2", n)
	}
	for _, p := range []*Pipeline{a1, a2} {
		_, err := do(t, p, "still there?")
		if !errors.Is(err, ErrTokenRevoked) {
			t.Errorf("err = %v, want ErrTokenRevoked", err)
		}
	}
	mustEcho(t, b, "b is unaffected")
	if n := ts.ln.CloseToken("a", ""); n != 0 {
		t.Errorf("second CloseToken closed %d", n)
	}
}

func TestManyConcurrentStreams(t *testing.T) {
	// More streams than quic-go's default limit of 100, all open at once:
	// the server answers none until every one has a request in.
	const streams = 300
	ts := newTestServer(t, Config{})
	var arrived atomic.Int32
	all := make(chan struct{})
	ts.serve(t, func(s *Stream, r *Request) {
		if arrived.Add(1) == streams {
			close(all)
		}
		<-all
		echo(s, r)
	})
	c := ts.dial(t, ClientConfig{})
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			s, err := c.OpenStream(testContext(t))
			if err != nil {
				errs <- err
				return
			}
			p := NewPipeline(s, 2)
			defer p.Close(testContext(t))
			for j := range 3 {
				body := numbered(i*10 + j)
				got, err := do(t, p, body)
				if err != nil {
					errs <- err
					return
				}
				if got != "echo:"+body {
					errs <- errors.New("reply " + got + " for " + body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := ts.ln.Stats().FramesRead; got != 3*streams {
		t.Errorf("FramesRead = %d, want %d", got, 3*streams)
	}
}

func TestPipelinedRepliesInOrder(t *testing.T) {
	// The server reads 500 requests before it answers any, so the client
	// must have written them all before reading a reply; then the replies
	// must come back in request order.
	const n = 500
	ts := newTestServer(t, Config{})
	var held []*Request
	ts.serve(t, func(s *Stream, r *Request) {
		held = append(held, r)
		if len(held) < n {
			return
		}
		for _, r := range held {
			if err := s.WriteFrame(frame("echo:" + bodyOf(r.Frame))); err != nil {
				t.Error(err)
			}
		}
		if err := s.Flush(); err != nil {
			t.Error(err)
		}
		for _, r := range held {
			r.Release()
		}
		held = nil
	})
	p := pipeline(t, ts.dial(t, ClientConfig{}), n)
	got := make(chan string, n)
	for i := range n {
		err := p.Send(testContext(t), frame(numbered(i)), func(reply []byte, err error) {
			if err != nil {
				got <- err.Error()
				return
			}
			got <- bodyOf(reply)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if r, want := wait(t, got, "a reply"), "echo:"+numbered(i); r != want {
			t.Fatalf("reply %d is %q, want %q", i, r, want)
		}
	}
	if err := p.Close(testContext(t)); err != nil {
		t.Errorf("Close: %v", err)
	}
	if s := ts.ln.Stats(); s.BudgetInUse != 0 || s.RequestsInFlight != 0 {
		t.Errorf("after the replies: %d budget bytes and %d requests in flight", s.BudgetInUse, s.RequestsInFlight)
	}
}

func TestConnectionLimit(t *testing.T) {
	ts := newTestServer(t, Config{MaxConns: 2})
	ts.serve(t, echo)
	// Of three connections, one is refused: the last one before its
	// handshake, or whichever reaches the limit last once through it
	// (without authentication, a connection counts from the end of its
	// handshake on the server, which can come in any order).
	var kept []*ClientConn
	refused := 0
	var ends []<-chan struct{}
	var conns []*ClientConn
	for range 3 {
		c, err := Dial(testContext(t), ts.addr(), ts.clientTLS(), ClientConfig{})
		if err != nil {
			if !errors.Is(err, ErrConnectionRefused) || !IsRetryable(err) {
				t.Fatalf("Dial: err = %v, want a retryable ErrConnectionRefused", err)
			}
			refused++
			continue
		}
		t.Cleanup(func() { _ = c.Close() })
		conns = append(conns, c)
		ends = append(ends, c.Context().Done())
	}
	if refused == 0 {
		select {
		case <-ends[0]:
		case <-ends[1]:
		case <-ends[2]:
		case <-testContext(t).Done():
			t.Fatal("three connections served with MaxConns 2")
		}
	}
	for _, c := range conns {
		if err := c.Err(); err != nil {
			if !errors.Is(err, ErrConnectionRefused) || !IsRetryable(err) {
				t.Fatalf("a connection ended with %v, want a retryable ErrConnectionRefused", err)
			}
			refused++
			continue
		}
		kept = append(kept, c)
	}
	if refused != 1 || len(kept) != 2 {
		t.Fatalf("%d refused and %d kept, want 1 and 2", refused, len(kept))
	}
	for _, c := range kept {
		mustEcho(t, pipeline(t, c, 1), "kept")
	}
	// (A client refused before its handshake may send its first packet
	// again, and is refused again: refusals count first packets.)
	if st := ts.ln.Stats(); st.RefusedLimit == 0 || st.ConnsRefused != st.RefusedLimit || st.Authenticated != 2 {
		t.Errorf("stats after a refusal: %+v", st)
	}

	// Once a connection is gone, its place is free again.
	_ = kept[0].Close()
	for {
		c, err := Dial(testContext(t), ts.addr(), ts.clientTLS(), ClientConfig{})
		if err == nil {
			defer c.Close()
			if _, err := do(t, pipeline(t, c, 1), "again"); err == nil {
				break
			}
			// It came through the handshake before the place was given back.
			continue
		}
		// The place is given back just after the connection's context
		// ends on the server; a dial in between is refused.
		if !errors.Is(err, ErrConnectionRefused) {
			t.Fatalf("Dial after a close: %v", err)
		}
	}
}

func TestListenValidatesConfig(t *testing.T) {
	eph, err := certs.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	conf := ServerTLSConfig(nil)
	conf.Certificates = []tls.Certificate{eph.Server}
	for name, cfg := range map[string]Config{
		"budget below frame":       {MaxFrameSize: 1 << 20, InflightBudget: 1 << 10},
		"stream max below initial": {InitialStreamReceiveWindow: 1 << 20, MaxStreamReceiveWindow: 1 << 19},
		"negative bound":           {MaxUnauthenticated: -1},
	} {
		if _, err := Listen("127.0.0.1:0", conf, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Listen("127.0.0.1:0", &tls.Config{}, Config{}); err == nil {
		t.Error("a TLS config without a certificate was accepted")
	}
}

func port(a net.Addr) int {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.Port
	}
	return -1
}

// fakeClock is a settable clock for certificate renewal.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestCertificateRenewedWhileServing(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	store, err := certs.Open(certs.Options{Dir: t.TempDir(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", ServerTLSConfig(store.GetCertificate), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{ln: ln}
	ts.serve(t, echo)
	conf, err := ClientTLSConfigFromCAFile(store.Paths().CA, "")
	if err != nil {
		t.Fatal(err)
	}
	conf.Time = clock.Now // the client checks validity on the same clock
	dial := func() (*ClientConn, string) {
		c, err := Dial(testContext(t), ln.Addr().String(), conf, ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, c.TLS().PeerCertificates[0].SerialNumber.String()
	}
	before, first := dial()
	clock.Advance(certs.DefaultServerValidity - certs.DefaultRenewBefore + time.Hour)
	after, second := dial()
	if first == second {
		t.Fatal("a handshake inside the renewal window got the old certificate")
	}
	if got := store.Certificate().Leaf.SerialNumber.String(); got != second {
		t.Errorf("store serves %s, handshake saw %s", got, second)
	}
	// The connection made with the old certificate is unaffected.
	mustEcho(t, pipeline(t, before, 1), "old")
	mustEcho(t, pipeline(t, after, 1), "new")
}

func TestReceiveWindowBudget(t *testing.T) {
	// The budget bounds how far windows grow beyond their initial size; it
	// no longer caps the number of connections.
	const budget = 256 << 10
	ts := newTestServer(t, Config{
		InitialConnectionReceiveWindow: 64 << 10,
		ReceiveWindowBudget:            budget,
	})
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 64)
	// Enough data to make quic-go want a larger window.
	body := strings.Repeat("w", 60<<10)
	for i := range 64 {
		mustEcho(t, p, numbered(i)+body)
	}
	if st := ts.ln.Stats(); st.WindowReserved > budget {
		t.Errorf("WindowReserved = %d, over the budget of %d", st.WindowReserved, budget)
	}
	for i := range 8 {
		mustEcho(t, pipeline(t, ts.dial(t, ClientConfig{}), 1), numbered(i))
	}
	st := ts.ln.Stats()
	if st.ConnsRefused != 0 || st.Authenticated != 9 {
		t.Errorf("with the budget spent: %d refused, %d connections, want 0 and 9", st.ConnsRefused, st.Authenticated)
	}
	t.Logf("window growth granted %d, increases denied %d", st.WindowReserved, st.WindowDenials)
}
