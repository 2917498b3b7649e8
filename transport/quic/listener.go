package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	quicgo "github.com/quic-go/quic-go"
)

// Listener accepts authenticated QUIC connections. Create one with
// [Listen]; it is safe for concurrent use.
type Listener struct {
	cfg    Config
	sock   *yieldingConn // the UDP socket tr reads
	tr     *quicgo.Transport
	ln     *quicgo.EarlyListener
	budget *budget
	adm    *admission

	ctx      context.Context // ends at Close
	cancel   context.CancelFunc
	accepted chan *Conn
	drainCh  chan struct{} // closed when Shutdown begins

	drainFlag atomic.Bool // set before drainCh is closed; read on every frame

	mu        sync.Mutex
	draining  bool
	conns     map[*Conn]struct{}
	byToken   map[string]map[*Conn]struct{}
	connsGone chan struct{} // closed and replaced when a connection goes away

	closeOnce sync.Once
	stats     counters

	// connsGen counts the changes of conns; Peers lists again after one.
	connsGen    atomic.Uint64
	peersMu     sync.Mutex // guards what Peers listed last:
	peers       []Peer
	peersListed bool
	peersGen    uint64
	peersAt     time.Time
}

type counters struct {
	connsAccepted, authFailures              atomic.Uint64
	streamsAccepted, framesRead, bytesRead   atomic.Uint64
	framesTooLarge, protocolErrors           atomic.Uint64
	connsOpen, streamsOpen, requestsInFlight atomic.Int64
}

// Stats are counters and gauges of a listener, for metrics.
type Stats struct {
	ConnsOpen       int64  // connections accepted by quic-go and not yet gone
	ConnsAccepted   uint64 // connections that completed the handshake
	ConnsRefused    uint64 // connection attempts refused, for any of the reasons below (a client may send its first packet again, and be counted again)
	RefusedLimit    uint64 // refused or closed at MaxConns
	RefusedToken    uint64 // closed at MaxConnsPerToken
	RefusedSource   uint64 // refused: the source address's handshake bucket was empty
	RefusedShutdown uint64 // refused while shutting down
	// RefusedHandshakes: refused because the node's handshakes waited
	// past Config.HandshakeWaitTarget for it.
	RefusedHandshakes uint64
	// HandshakeWait is the least time the handshakes the node took up in
	// the last 100 ms had waited for it; 0 when it took up none.
	HandshakeWait   time.Duration
	Evicted         uint64 // unauthenticated connections closed to make room for newer ones
	RetriesDemanded uint64 // connection attempts asked to prove their address (QUIC Retry)
	AuthFailures    uint64 // connections closed because authentication failed or timed out
	// Unauthenticated and Authenticated count the connections holding a
	// place of each kind now; Sources the source addresses with a bucket.
	Unauthenticated, Authenticated, Sources int
	StreamsOpen                             int64
	StreamsAccepted                         uint64
	FramesRead                              uint64
	BytesRead                               uint64
	FramesTooLarge                          uint64 // streams reset because a frame exceeded MaxFrameSize
	ProtocolErrors                          uint64 // streams reset because of a malformed frame header
	RequestsInFlight                        int64  // frames read and not yet released
	BudgetCapacity                          int64  // Config.InflightBudget
	BudgetInUse                             int64  // bytes of requests in flight
	BudgetWaits                             uint64 // reads that waited for the budget (backpressure events)
	BudgetWaiting                           int64  // readers waiting for the budget now
	WindowReserved                          uint64 // bytes of connection window growth granted beyond the initial windows
	WindowDenials                           uint64 // window increases refused by ReceiveWindowBudget
}

type ticketKey struct{}

// serverConnIDLen is the length of the connection IDs a listener issues,
// which its clients put in every packet they send it. quic-go sends a
// stateless reset only in answer to a packet longer than 42 bytes; with
// its default of 4 bytes, a small request (a DescribeTopic of a short
// name) made a packet of 42 bytes or fewer, which a restarted node
// dropped without a reset, and the client waited out its request
// timeout. With 16 bytes, any packet carrying a request frame is long
// enough: 1 + 16 + 1 (packet number) + 2 (STREAM frame) + a frame of at
// least 12 (its header) + 16 (AEAD tag) = 48.
const serverConnIDLen = 16

// Listen listens for QUIC connections on the UDP address addr (host:port;
// port 0 picks one). tlsConf must provide the server certificate
// (Certificates or GetCertificate); Listen enforces TLS 1.3 and the ALPN
// protocol [ALPN] on a copy of it.
func Listen(addr string, tlsConf *tls.Config, cfg Config) (*Listener, error) {
	return listen(addr, tlsConf, cfg, time.Now)
}

// listen is Listen, with the admission's clock.
func listen(addr string, tlsConf *tls.Config, cfg Config, now func() time.Time) (*Listener, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if tlsConf == nil || (len(tlsConf.Certificates) == 0 && tlsConf.GetCertificate == nil && tlsConf.GetConfigForClient == nil) {
		return nil, errors.New("quic: Listen needs a tls.Config with a server certificate")
	}
	tlsConf = enforceTLS(tlsConf)
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("quic: resolve %q: %w", addr, err)
	}
	sock, err := listenUDP(udpAddr)
	if err != nil {
		return nil, fmt.Errorf("quic: listen on %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		cfg:       cfg,
		sock:      sock,
		budget:    newBudget(cfg.InflightBudget),
		adm:       newAdmission(cfg.admissionLimits(), now),
		ctx:       ctx,
		cancel:    cancel,
		accepted:  make(chan *Conn),
		drainCh:   make(chan struct{}),
		conns:     make(map[*Conn]struct{}),
		byToken:   make(map[string]map[*Conn]struct{}),
		connsGone: make(chan struct{}),
	}
	l.notedTakeUp(tlsConf)
	l.tr = &quicgo.Transport{
		Conn:                l.sock,
		ConnectionIDLength:  serverConnIDLen,
		ConnContext:         l.admit,
		VerifySourceAddress: l.adm.demandRetry,
	}
	if cfg.StatelessResetKey != nil {
		key := quicgo.StatelessResetKey(*cfg.StatelessResetKey)
		l.tr.StatelessResetKey = &key
		// Peers: four connection IDs a connection, for those it moves on to.
		sock.peers = newPeerTable(4*(cfg.MaxConns+cfg.MaxUnauthenticated), time.Now)
	}
	// The early listener hands over a connection as soon as its ClientHello
	// is processed (there is no 0-RTT: Allow0RTT is off), so that one which
	// never finishes its handshake can be evicted like one which never
	// authenticates.
	ln, err := l.tr.ListenEarly(tlsConf, cfg.quicConfig(l.allowWindowIncrease))
	if err != nil {
		cancel()
		_ = l.tr.Close()
		_ = sock.Close()
		return nil, fmt.Errorf("quic: listen on %s: %w", addr, err)
	}
	l.ln = ln
	sock.logBuffers(cfg.Logger) // quic-go has sized them by now
	go l.acceptLoop()
	return l, nil
}

// Addr returns the UDP address the listener is bound to.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Accept returns the next authenticated connection. It returns
// ErrServerClosed once the listener is shutting down or closed.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.drainCh:
		return nil, ErrServerClosed
	case <-l.ctx.Done():
		return nil, ErrServerClosed
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Draining returns a channel closed when Shutdown begins.
func (l *Listener) Draining() <-chan struct{} { return l.drainCh }

// admit is quic-go's ConnContext: it takes an unauthenticated place for a
// new connection, or refuses it (before any TLS work). The place is given
// back when the connection's context ends.
func (l *Listener) admit(ctx context.Context, info *quicgo.ClientInfo) (context.Context, error) {
	t, err := l.adm.admit(info.RemoteAddr)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { l.adm.release(t) })
	return context.WithValue(ctx, ticketKey{}, t), nil
}

// notedTakeUp makes conf (the listener's copy) tell the admission when
// the node takes up a handshake: crypto/tls asks GetConfigForClient once a
// ClientHello is complete, before its key exchange and signature, and
// the hello's context is the connection's (admit's). A handshake whose
// connection was evicted while it waited, or that waited past half the
// handshake timeout, is failed there, before that work: the client sees
// an internal error of the node's TLS, which it takes as a refusal
// (ErrConnectionRefused).
func (l *Listener) notedTakeUp(conf *tls.Config) {
	next := conf.GetConfigForClient
	late := l.cfg.HandshakeTimeout / 2
	conf.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if t, _ := hello.Context().Value(ticketKey{}).(*ticket); t != nil {
			if err := l.adm.handshakeStarted(t, late); err != nil {
				return nil, err
			}
		}
		if next != nil {
			return next(hello)
		}
		return nil, nil
	}
}

func ticketOf(qc *quicgo.Conn) *ticket {
	t, _ := qc.Context().Value(ticketKey{}).(*ticket)
	return t
}

// allowWindowIncrease lets an authenticated connection's receive window
// grow while the receive window budget covers it.
func (l *Listener) allowWindowIncrease(qc *quicgo.Conn, delta uint64) bool {
	t := ticketOf(qc)
	return t != nil && l.adm.growWindow(t, delta)
}

func (l *Listener) acceptLoop() {
	for {
		qc, err := l.ln.Accept(l.ctx)
		if err != nil {
			return
		}
		go l.setup(qc)
	}
}

// setup registers a new connection, waits for its handshake,
// authenticates it and hands it to Accept. Until it has authenticated it
// may be evicted (see admission).
func (l *Listener) setup(qc *quicgo.Conn) {
	t := ticketOf(qc)
	c := newConn(l, qc)
	l.mu.Lock()
	if l.draining || t == nil {
		l.mu.Unlock()
		_ = qc.CloseWithError(quicgo.ApplicationErrorCode(CodeShutdown), "server shutting down")
		return
	}
	l.conns[c] = struct{}{}
	l.connsGen.Add(1)
	l.stats.connsOpen.Add(1)
	l.mu.Unlock()
	context.AfterFunc(qc.Context(), c.gone)
	stopEviction := context.AfterFunc(t.evicted, func() {
		if errors.Is(context.Cause(t.evicted), errEvicted) {
			c.close(CodeAuthTimeout, errEvicted.Error())
		}
	})
	defer stopEviction()

	select {
	case <-qc.HandshakeComplete():
	case <-qc.Context().Done():
		return
	}
	l.stats.connsAccepted.Add(1)

	var id Identity
	if l.cfg.Authenticate != nil {
		var err error
		if id, err = l.authenticate(c); err != nil {
			code, reason := CodeUnauthenticated, err.Error()
			var ce *CloseError
			if errors.As(err, &ce) {
				code, reason = ce.Code, ce.Reason
			}
			if code != CodeShutdown && context.Cause(t.evicted) != errEvicted {
				l.stats.authFailures.Add(1)
				l.cfg.Logger.Info("connection refused", "remote", qc.RemoteAddr(), "code", code, "reason", reason)
			}
			c.close(code, reason)
			return
		}
	}
	if err := l.adm.authenticated(t, id.TokenID); err != nil {
		if !errors.Is(err, errEvicted) {
			l.cfg.Logger.Info("connection refused", "remote", qc.RemoteAddr(), "token", id.TokenID, "reason", err.Error())
			c.close(CodeConnectionLimit, err.Error())
		}
		return
	}
	if !l.register(c, id) {
		c.close(CodeShutdown, "server shutting down")
		return
	}
	c.mu.Lock()
	c.delivered = true
	c.mu.Unlock()
	select {
	case l.accepted <- c:
	case <-l.drainCh:
		c.close(CodeShutdown, "server shutting down")
	case <-l.ctx.Done():
	case <-qc.Context().Done():
	}
}

// authenticate reads the first frame of the first stream and asks the
// node. The stream stays open: it becomes the connection's first stream.
func (l *Listener) authenticate(c *Conn) (Identity, error) {
	ctx, cancel := context.WithTimeout(c.qc.Context(), l.cfg.AuthTimeout)
	defer cancel()
	timeout := &CloseError{Code: CodeAuthTimeout, Reason: fmt.Sprintf("no authentication frame within %v", l.cfg.AuthTimeout)}
	qs, err := c.qc.AcceptStream(ctx)
	if err != nil {
		if ctx.Err() != nil && c.qc.Context().Err() == nil {
			return Identity{}, timeout
		}
		return Identity{}, &CloseError{Code: CodeProtocolError, Reason: "connection ended before authentication"}
	}
	s := c.track(qs)
	if s == nil {
		return Identity{}, &CloseError{Code: CodeShutdown, Reason: "server shutting down"}
	}
	_ = qs.SetReadDeadline(time.Now().Add(l.cfg.AuthTimeout))
	req, err := s.ReadFrame()
	_ = qs.SetReadDeadline(time.Time{})
	switch {
	case errors.Is(err, ErrFrameTooLarge):
		return Identity{}, &CloseError{Code: CodeUnauthenticated, Reason: "authentication frame too large"}
	case errors.Is(err, ErrServerClosed):
		return Identity{}, &CloseError{Code: CodeShutdown, Reason: "server shutting down"}
	case isTimeout(err):
		return Identity{}, timeout
	case err != nil:
		return Identity{}, &CloseError{Code: CodeProtocolError, Reason: "no authentication frame: " + err.Error()}
	}
	id, reply, err := l.cfg.Authenticate(ctx, AuthRequest{
		Frame:      req.Frame,
		RemoteAddr: c.qc.RemoteAddr(),
		TLS:        c.qc.ConnectionState().TLS,
	})
	if err != nil {
		req.Release()
		return Identity{}, err
	}
	if reply != nil {
		if err := s.Reply(req, reply); err != nil {
			return Identity{}, &CloseError{Code: CodeProtocolError, Reason: "authentication reply: " + err.Error()}
		}
	} else {
		req.Release()
	}
	c.mu.Lock()
	c.first = s
	c.mu.Unlock()
	return id, nil
}

// register records an authenticated connection under its token id.
func (l *Listener) register(c *Conn, id Identity) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.draining {
		return false
	}
	c.id = id
	if c.id.TokenID != "" {
		set := l.byToken[c.id.TokenID]
		if set == nil {
			set = make(map[*Conn]struct{})
			l.byToken[c.id.TokenID] = set
		}
		set[c] = struct{}{}
	}
	return true
}

// forget drops a connection that went away.
func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	if _, ok := l.conns[c]; ok {
		delete(l.conns, c)
		l.connsGen.Add(1)
		l.stats.connsOpen.Add(-1)
	}
	if set := l.byToken[c.id.TokenID]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(l.byToken, c.id.TokenID)
		}
	}
	close(l.connsGone)
	l.connsGone = make(chan struct{})
	l.mu.Unlock()
}

// CloseToken closes every connection that authenticated with tokenID, with
// [CodeTokenRevoked] and reason, and returns how many it closed. The node
// calls it when it revokes a token.
func (l *Listener) CloseToken(tokenID, reason string) int {
	l.mu.Lock()
	conns := make([]*Conn, 0, len(l.byToken[tokenID]))
	for c := range l.byToken[tokenID] {
		conns = append(conns, c)
	}
	delete(l.byToken, tokenID)
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.close(CodeTokenRevoked, reason) })
	}
	wg.Wait()
	return len(conns)
}

// Shutdown stops accepting connections and streams, lets requests already
// read be answered, ends each stream once its client has read the replies,
// and closes every connection with [CodeShutdown]. When ctx ends first, the
// remaining connections are closed at once and ctx's error is returned.
// Requests that got no reply were never read: clients may retry them.
func (l *Listener) Shutdown(ctx context.Context) error {
	l.mu.Lock()
	if !l.draining {
		l.draining = true
		l.drainFlag.Store(true)
		close(l.drainCh)
	}
	conns := make([]*Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	l.adm.refuseNew()
	_ = l.ln.Close()

	for _, c := range conns {
		go c.drain(ctx)
	}
	var err error
	for {
		l.mu.Lock()
		n, gone := len(l.conns), l.connsGone
		l.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-gone:
			continue
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		break
	}
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close closes every connection with [CodeShutdown] at once and releases
// the UDP socket. Prefer Shutdown.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.mu.Lock()
		if !l.draining {
			l.draining = true
			l.drainFlag.Store(true)
			close(l.drainCh)
		}
		conns := make([]*Conn, 0, len(l.conns))
		for c := range l.conns {
			conns = append(conns, c)
		}
		l.mu.Unlock()
		l.adm.refuseNew()
		l.cancel()
		_ = l.ln.Close()
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() { c.close(CodeShutdown, "server shutting down") })
		}
		wg.Wait()
		// Each closed connection releases what its streams held; wait for
		// that so the counters are final when Close returns.
		for {
			l.mu.Lock()
			n, gone := len(l.conns), l.connsGone
			l.mu.Unlock()
			if n == 0 {
				break
			}
			<-gone
		}
		_ = l.tr.Close()
		err = l.sock.Close()
	})
	return err
}

// Stats returns the listener's counters.
func (l *Listener) Stats() Stats {
	a := l.adm.snapshot()
	return Stats{
		ConnsOpen:         l.stats.connsOpen.Load(),
		ConnsAccepted:     l.stats.connsAccepted.Load(),
		ConnsRefused:      a.refusedLimit + a.refusedTokenLimit + a.refusedSourceRate + a.refusedShutdown + a.refusedHandshakes,
		RefusedHandshakes: a.refusedHandshakes,
		HandshakeWait:     a.handshakeWait,
		RefusedLimit:      a.refusedLimit,
		RefusedToken:      a.refusedTokenLimit,
		RefusedSource:     a.refusedSourceRate,
		RefusedShutdown:   a.refusedShutdown,
		Evicted:           a.evicted,
		RetriesDemanded:   a.retries,
		Unauthenticated:   a.unauthenticated,
		Authenticated:     a.authenticated,
		Sources:           a.sources,
		AuthFailures:      l.stats.authFailures.Load(),
		StreamsOpen:       l.stats.streamsOpen.Load(),
		StreamsAccepted:   l.stats.streamsAccepted.Load(),
		FramesRead:        l.stats.framesRead.Load(),
		BytesRead:         l.stats.bytesRead.Load(),
		FramesTooLarge:    l.stats.framesTooLarge.Load(),
		ProtocolErrors:    l.stats.protocolErrors.Load(),
		RequestsInFlight:  l.stats.requestsInFlight.Load(),
		BudgetCapacity:    l.budget.capacity,
		BudgetInUse:       l.budget.inUse(),
		BudgetWaits:       l.budget.waits.Load(),
		BudgetWaiting:     l.budget.waiting.Load(),
		WindowReserved:    a.windowGrown,
		WindowDenials:     a.windowDenials,
	}
}
