package sdk

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// controlDepth is how many requests the control stream keeps in flight.
const controlDepth = 64

// Client is a connection to a Ledge node: admin requests, and the
// producers and consumers made from it share it. It is safe for
// concurrent use. When the connection breaks (the node restarts, a
// network path changes), the next request dials again; producers resend
// what was not acknowledged.
type Client struct {
	addr  string
	cfg   clientConfig
	tls   *tls.Config
	token string

	dialing chan struct{} // a one-slot lock around dials that respects contexts
	redial  redial        // pauses between refused dials (redial.go)
	ids     atomic.Uint32
	// plainAuth: the node refused Authenticate's flags (it is older than
	// them), so the client authenticates without them.
	plainAuth atomic.Bool

	mu     sync.Mutex
	sess   *session
	closed bool
}

// session is one authenticated connection and its control stream.
//
// The control stream carries the client's calls (admin requests,
// InitProducer, AttachConsumer, commits, group calls) and is open only
// while one is in flight: concurrent calls share it, pipelined, and the
// last of them to finish closes its sending side, so an idle client
// holds no stream the node must keep a reader for (a device polling and
// producing keeps just its consumer's and producer's). The next call
// opens another; opening a QUIC stream costs no round trip.
type session struct {
	conn *quic.ClientConn
	auth wire.AuthenticateReply

	mu      sync.Mutex
	control *controlStream // nil while no call uses one
}

// controlStream is a control stream and the calls using it, counted
// under session.mu.
type controlStream struct {
	pipe  *quic.Pipeline
	users int
}

// Dial connects to the node at addr (host:port) and authenticates. See
// the Option functions for credentials: run beside a node (in the
// directory holding its ledge-data), Dial needs none.
//
// An empty addr is LEDGE_SERVER (EnvServer), else the address a node
// running on the data directory recorded in its listen file (see
// WithDataDir, else LEDGE_DATA_DIR), else DefaultAddr: a node started
// on any port is found through its data directory.
//
// When no node answers, the error is a *DialError matching
// ErrNodeUnreachable, saying which address was dialed and where it came
// from. A host that answers that nothing listens on the port fails
// Dial at once rather than after the dial timeout. A node that refuses
// the connection for now (at its connection limit, behind with its
// handshakes, shutting down) is dialed again after a pause that grows
// while it keeps refusing (100–200 ms, doubling up to 2.5–5 s, at
// random within each), within the dial timeout; Dial then fails with an
// error matching quic.ErrConnectionRefused (or ErrServerClosed).
// Reconnections pause the same way.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	cfg := defaultClientConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	cfg.fromEnv(os.Getenv)
	addr, source, from := cfg.resolveAddr(addr, os.Getenv)
	tlsConf, token, err := cfg.credentials(addr)
	if err != nil {
		return nil, err
	}
	c := &Client{addr: addr, cfg: cfg, tls: tlsConf, token: token, dialing: make(chan struct{}, 1)}
	// The first dial races a probe that learns at once when nothing
	// listens on the port (reconnections wait for a restarting node).
	dialCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		if probeNotListening(dialCtx, addr) {
			cancel(errNotListening)
		}
	}()
	if _, err := c.session(dialCtx); err != nil {
		notListening := errors.Is(context.Cause(dialCtx), errNotListening)
		if notListening {
			err = errNotListening
		}
		if !errors.Is(ctx.Err(), context.Canceled) && (notListening || unreachable(err)) {
			return nil, &DialError{Addr: addr, Source: source, From: from, NotListening: notListening, Err: err}
		}
		return nil, err
	}
	return c, nil
}

// Addr returns the address the client dials.
func (c *Client) Addr() string { return c.addr }

// NodeVersion returns the software version the node reported when the
// current connection authenticated.
func (c *Client) NodeVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return ""
	}
	return c.sess.auth.NodeVersion
}

// Close closes the connection. Producers and consumers made from the
// client stop working; close them first to flush and commit. It takes no
// context because it waits for nothing: the waiting (flushing records,
// committing offsets) is theirs, bounded by the contexts of their Close.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.sess
	c.sess = nil
	c.mu.Unlock()
	if s != nil {
		return s.conn.Close()
	}
	return nil
}

func (c *Client) nextID() uint32 { return c.ids.Add(1) }

func (c *Client) requestTimeout() time.Duration { return c.cfg.requestTimeout }

func (c *Client) logger() *slog.Logger { return c.cfg.logger }

// session returns the live session, dialing a new one when there is none
// or the last one died.
func (c *Client) session(ctx context.Context) (*session, error) {
	s, auth, err := c.connect(ctx)
	if auth != nil {
		s.release(auth, false)
	}
	return s, err
}

// connect is session; when it dialed, it also returns the stream the
// connection authenticated on, still held for the caller: a call goes on
// with it, anything else releases it (which closes it unless a call
// already took it too).
func (c *Client) connect(ctx context.Context) (*session, *controlStream, error) {
	if s, err := c.liveSession(); s != nil || err != nil {
		return s, nil, err
	}
	select {
	case c.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, context.Cause(ctx)
	}
	defer func() { <-c.dialing }()
	if s, err := c.liveSession(); s != nil || err != nil {
		return s, nil, err
	}
	s, err := c.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	auth := s.control // before s is shared: a call's failure may let it go
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = s.conn.Close()
		return nil, nil, ErrClosed
	}
	old := c.sess
	c.sess = s
	c.mu.Unlock()
	if old != nil {
		_ = old.conn.Close()
		c.cfg.logger.Info("reconnected", "addr", c.addr)
	}
	return s, auth, nil
}

func (c *Client) liveSession() (*session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if s := c.sess; s != nil && s.conn.Err() == nil {
		return s, nil
	}
	return nil, nil
}

// dial connects and authenticates within the dial timeout. A dial the
// node refuses for now is tried again after a growing, jittered pause
// (redial.go) while the timeout allows; the pause left over when it does
// not is waited by the next dial.
func (c *Client) dial(parent context.Context) (*session, error) {
	ctx, cancel := context.WithTimeout(parent, c.cfg.dialTimeout)
	defer cancel()
	var refusal error
	for {
		if d := c.redial.pause(time.Now()); d > 0 {
			dl, ok := ctx.Deadline()
			outlasts := ok && time.Until(dl) < d
			switch {
			case outlasts && refusal != nil:
				return nil, refusal
			case outlasts:
				// A dial timeout shorter than the pause: try now rather
				// than fail without asking.
			case !sleepCtx(ctx, d):
				if refusal != nil {
					return nil, refusal
				}
				return nil, context.Cause(ctx)
			}
		}
		s, err := c.dialOnce(ctx)
		switch {
		case err == nil:
			c.redial.connected()
			return s, nil
		case ctx.Err() != nil && parent.Err() == nil:
			// Timed out: the node may be behind with its handshakes
			// rather than down; the next dial pauses first. A node that
			// refused this dial before answered: say so.
			c.redial.refuse(time.Now())
			if refusal != nil {
				return nil, fmt.Errorf("%w (then: %w)", refusal, err)
			}
			return nil, err
		case !refusedForNow(err):
			return nil, err
		}
		refusal = err
		d := c.redial.refuse(time.Now())
		c.cfg.logger.Debug("the node refused the connection for now; dialing again after a pause", "addr", c.addr, "pause", d, "err", err)
	}
}

// dialOnce connects and authenticates on the first stream, which becomes
// the session's control stream, held once for the caller of dial. It
// announces that it reads a busy reply's retry-after; a node older than
// that announcement closes the connection as malformed, and dialOnce
// connects again without it.
func (c *Client) dialOnce(ctx context.Context) (*session, error) {
	if c.plainAuth.Load() {
		return c.dialAs(ctx, 0)
	}
	s, err := c.dialAs(ctx, wire.AuthReadsRetryAfter)
	if err != nil && errors.Is(err, quic.ErrProtocol) {
		c.plainAuth.Store(true)
		return c.dialAs(ctx, 0)
	}
	return s, err
}

func (c *Client) dialAs(ctx context.Context, flags wire.AuthFlags) (*session, error) {
	conn, err := quic.Dial(ctx, c.addr, c.tls, quic.ClientConfig{Transport: c.cfg.transport})
	if err != nil {
		return nil, transportError("dial", err)
	}
	st, err := conn.OpenStream(ctx)
	if err != nil {
		_ = conn.Close()
		return nil, transportError("dial", err)
	}
	pipe := quic.NewPipeline(st, controlDepth)
	frame, err := wire.AppendRequest(nil, c.nextID(), &wire.AuthenticateRequest{Token: c.token, Flags: flags})
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("sdk: authenticate: %w", err)
	}
	raw, err := pipe.Do(ctx, frame)
	if err != nil {
		// A refused token closes the connection: its code says why.
		if cerr := conn.Err(); cerr != nil {
			err = cerr
		}
		_ = conn.Close()
		return nil, transportError("authenticate", err)
	}
	s := &session{conn: conn, control: &controlStream{pipe: pipe, users: 1}}
	if err := decodeReply(raw, &s.auth); err != nil {
		_ = conn.Close()
		return nil, nodeError("authenticate", "", -1, err)
	}
	return s, nil
}

// acquire returns the session's control stream for one call, opening one
// when no call is using it (or the last one failed). The caller releases
// it when its call is over.
func (s *session) acquire(ctx context.Context) (*controlStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.control == nil {
		st, err := s.conn.OpenStream(ctx)
		if err != nil {
			return nil, err
		}
		s.control = &controlStream{pipe: quic.NewPipeline(st, controlDepth)}
	}
	s.control.users++
	return s.control, nil
}

// release ends one call's use of cs. A failed stream is taken out of use
// at once, so the next call opens another; the last call to release a
// stream closes its sending side (gracefully: a reply still owed to a
// call that stopped waiting is read first).
func (s *session) release(cs *controlStream, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs.users--
	if (failed || cs.users == 0) && s.control == cs {
		s.control = nil
	}
	if cs.users == 0 {
		cs.pipe.CloseSend()
	}
}

// maxFrame is the largest request frame the node accepts.
func (s *session) maxFrame() int {
	if n := int(s.auth.MaxFrameSize); n > 0 {
		return n
	}
	return quic.DefaultMaxRequestFrame
}

// withRequestTimeout bounds ctx by the request timeout plus extra.
func (c *Client) withRequestTimeout(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.requestTimeout+extra)
}

// call sends req on the control stream and decodes the reply into reply.
// A request the node never read (its stream or connection ended first),
// or whose connection a restarted node reset (the first request after a
// node's crash meets its successor, which never saw it), is sent again on
// a new connection, a few times; any other failure is returned. A refusal
// is an *Error.
func (c *Client) call(parent context.Context, req, reply wire.Message) error {
	ctx, cancel := c.withRequestTimeout(parent, 0)
	defer cancel()
	op := req.Kind().String()
	frame, err := wire.AppendRequest(nil, c.nextID(), req)
	if err != nil {
		return nodeError(op, "", -1, err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, cs, err := c.connect(ctx)
		if err != nil {
			return err
		}
		if len(frame) > s.maxFrame() {
			if cs != nil {
				s.release(cs, false)
			}
			return &Error{Op: op, Partition: -1, Status: wire.StatusMessageTooLarge,
				Message: fmt.Sprintf("request of %d bytes exceeds the node's limit of %d", len(frame), s.maxFrame())}
		}
		if cs == nil {
			if cs, err = s.acquire(ctx); err != nil {
				c.noteReset(s, err)
				lastErr = err
				continue
			}
		}
		raw, err := cs.pipe.Do(ctx, frame)
		s.release(cs, err != nil && ctx.Err() == nil)
		if err != nil {
			if ctx.Err() != nil {
				if parent.Err() == nil {
					c.dropSession(s) // our own timeout: the connection may be dead
				}
				return fmt.Errorf("sdk: %s: %w", op, err)
			}
			lastErr = err
			c.noteReset(s, err)
			if errors.Is(err, quic.ErrNotProcessed) || errors.Is(err, quic.ErrServerClosed) ||
				errors.Is(err, quic.ErrClosed) || quic.IsConnectionReset(err) {
				continue
			}
			return transportError(op, err)
		}
		return nodeError(op, "", -1, decodeReply(raw, reply))
	}
	return transportError(op, lastErr)
}

// decodeReply decodes a whole reply frame (header included) into m. A
// non-OK status is a *wire.Error.
func decodeReply(frame []byte, m wire.Message) error {
	h, n, err := wire.ParseFrameHeader(frame, len(frame))
	if err != nil {
		return err
	}
	if n != len(frame)-wire.FrameHeaderSize {
		return fmt.Errorf("sdk: reply frame of %d bytes declares %d", len(frame), n)
	}
	return wire.DecodeReply(wire.Frame{FrameHeader: h, Body: frame[wire.FrameHeaderSize:]}, m)
}

// openStream opens a pipelined stream for a producer partition or a
// consumer's polls.
func (c *Client) openStream(ctx context.Context, depth int) (requestStream, int, error) {
	for attempt := 0; ; attempt++ {
		s, err := c.session(ctx)
		if err != nil {
			return nil, 0, err
		}
		st, err := s.conn.OpenStream(ctx)
		if err == nil {
			return &sessionStream{Pipeline: quic.NewPipeline(st, depth), s: s}, s.maxFrame(), nil
		}
		if attempt > 0 || (s.conn.Err() == nil && !c.noteReset(s, err)) {
			return nil, 0, transportError("open stream", err)
		}
	}
}

// noteReset forgets s when err says the node reset its connection (it
// restarted), and reports whether it did. The connection's context may
// end only after its streams failed: without this, the next attempt could
// find it still alive and fail on it again.
func (c *Client) noteReset(s *session, err error) bool {
	if !quic.IsConnectionReset(err) {
		return false
	}
	c.forgetSession(s)
	c.cfg.logger.Info("the node reset the connection (it restarted); reconnecting", "addr", c.addr)
	return true
}

// sessionStream is a pipelined stream and the session it belongs to.
type sessionStream struct {
	*quic.Pipeline
	s *session
}

// streamTimedOut is told that a request on st got no reply within the
// request timeout. A node that died without closing the connection (a
// crash, a lost network) leaves it looking alive until the idle timeout,
// and a new stream on it would hang the same way: drop the connection, so
// the next request dials again.
func (c *Client) streamTimedOut(st requestStream) {
	if ss, ok := st.(*sessionStream); ok {
		c.dropSession(ss.s)
	}
}

// dropSession closes s and forgets it if it is the current session.
func (c *Client) dropSession(s *session) {
	c.forgetSession(s)
	c.cfg.logger.Warn("no reply within the request timeout; reconnecting", "addr", c.addr)
}

// forgetSession closes s and forgets it if it is the current session, so
// that the next request dials again.
func (c *Client) forgetSession(s *session) {
	c.mu.Lock()
	if c.sess == s {
		c.sess = nil
	}
	c.mu.Unlock()
	_ = s.conn.Close()
}

// requestStream is an ordered, pipelined request stream: what producers
// and consumers need of a *quic.Pipeline (and what tests fake).
type requestStream interface {
	// Send queues frame; cb gets its reply or error, in request order.
	// Once frame's reply has come, the stream holds no reference to it:
	// a producer reuses the frames of acknowledged batches.
	Send(ctx context.Context, frame []byte, cb func(reply []byte, err error)) error
	// Close waits for the replies in flight and ends the stream; with an
	// ended ctx it aborts the stream, and every unanswered request gets an
	// error.
	Close(ctx context.Context) error
}

// headSender is a requestStream that shows the start of a large reply
// before the rest is read (quic.Pipeline.SendHead); a consumer sends its
// next poll from it.
type headSender interface {
	SendHead(ctx context.Context, frame []byte, headLen int, head func(start []byte), cb func(reply []byte, err error)) error
}

// streamOpener opens request streams; *Client is the real one.
type streamOpener interface {
	openStream(ctx context.Context, depth int) (requestStream, int, error)
}
