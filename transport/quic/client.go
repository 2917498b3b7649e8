package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	quicgo "github.com/quic-go/quic-go"
)

// ClientConn is a client's connection to a node. The first stream opened on
// it must carry the authentication frame (when the node expects one).
type ClientConn struct {
	qc   *quicgo.Conn
	cfg  ClientConfig
	sock *yieldingConn // the connection's own socket, closed when it ends
}

// Dial connects to a node at addr (host:port) over QUIC with TLS 1.3 and
// ALPN [ALPN], enforced on a copy of tlsConf (see [ClientTLSConfig]). An
// error matching ErrConnectionRefused means the node is at its connection
// limit, behind with its handshakes, or shutting down: retry later, after
// a pause (the SDK waits a growing, jittered one).
//
// A node that does not answer (it is down, or restarting) gets a fresh
// attempt every 250 ms beside those under way, at most four at once: an
// attempt's retransmissions of its first packet back off, doubling, so an
// attempt begun while the node was down would reach it seconds after it
// came back, while a fresh one reaches it at once. The first attempt to
// connect wins; the attempts under way go on, so a slow path still
// connects. Once the node has answered anything on an attempt's socket
// (a Retry, its handshake; on a shared [Transport], anything at all), no
// fresh attempt starts: the node is up, and behind, and another
// handshake would only add to what it has to do.
func Dial(ctx context.Context, addr string, tlsConf *tls.Config, cfg ClientConfig) (*ClientConn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if tlsConf == nil {
		return nil, errors.New("quic: Dial needs a tls.Config")
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("quic: dial %s: %w", addr, err)
	}
	tlsConf = enforceTLS(tlsConf)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		c   *ClientConn
		err error
	}
	results := make(chan result, maxDialAttempts)
	running := 0
	// The sockets of the attempts, and the datagrams each had received
	// when its attempt began.
	type attemptSocket struct {
		sock *yieldingConn
		from uint64
	}
	var sockets []attemptSocket
	attempt := func() {
		running++
		sock, own, err := dialSocket(cfg)
		if err == nil {
			sockets = append(sockets, attemptSocket{sock, sock.received.Load()})
		}
		go func() {
			var c *ClientConn
			if err == nil {
				c, err = dialOnce(ctx, sock, own, raddr, tlsConf, cfg)
			}
			if err != nil {
				err = fmt.Errorf("quic: dial %s: %w", addr, err)
			}
			results <- result{c, err}
		}()
	}
	answered := func() bool {
		for _, a := range sockets {
			if a.sock.received.Load() != a.from {
				return true
			}
		}
		return false
	}
	// settle closes what the attempts still under way connect.
	settle := func() {
		cancel()
		go func(n int) {
			for range n {
				if r := <-results; r.c != nil {
					_ = r.c.Close()
				}
			}
		}(running)
	}
	attempt()
	tick := time.NewTicker(dialAttemptEvery)
	defer tick.Stop()
	for {
		select {
		case r := <-results:
			running--
			var ne net.Error
			switch {
			case r.err == nil:
				settle()
				return r.c, nil
			case ctx.Err() == nil && !(errors.As(r.err, &ne) && ne.Timeout()):
				// Refused (TLS, version, connection limit): say so at once.
				settle()
				return nil, r.err
			case running == 0 && ctx.Err() != nil:
				return nil, r.err
			case running == 0:
				attempt()
			}
		case <-tick.C:
			if running < maxDialAttempts && ctx.Err() == nil && !answered() {
				attempt()
			}
		}
	}
}

// Dial's attempts: how often a new one starts while none has connected
// and the node has not answered, and how many may be under way at once.
const (
	dialAttemptEvery = 250 * time.Millisecond
	maxDialAttempts  = 4
)

// dialSocket is the socket of one attempt of Dial: cfg.Transport's
// shared one, or a socket of the attempt's own (own), read through
// yieldingConn as quic.DialAddr's would be read by quic-go.
func dialSocket(cfg ClientConfig) (sock *yieldingConn, own bool, err error) {
	if t := cfg.Transport; t != nil {
		return t.sock, false, nil
	}
	sock, err = listenUDP(&net.UDPAddr{IP: net.IPv4zero})
	return sock, true, err
}

// dialOnce is one attempt of Dial, on sock (see dialSocket).
func dialOnce(ctx context.Context, sock *yieldingConn, own bool, raddr *net.UDPAddr, tlsConf *tls.Config, cfg ClientConfig) (*ClientConn, error) {
	if !own {
		qc, err := cfg.Transport.qt.Dial(ctx, raddr, tlsConf, cfg.quicConfig())
		if err != nil {
			return nil, mapError(err)
		}
		return &ClientConn{qc: qc, cfg: cfg}, nil
	}
	qc, err := quicgo.Dial(ctx, sock, raddr, tlsConf, cfg.quicConfig())
	if err != nil {
		_ = sock.Close()
		return nil, mapError(err)
	}
	// quic-go stops reading the socket when the connection closes (after
	// sending its CONNECTION_CLOSE) but leaves a socket it did not make
	// open.
	context.AfterFunc(qc.Context(), func() { _ = sock.Close() })
	return &ClientConn{qc: qc, cfg: cfg, sock: sock}, nil
}

// IsConnectionReset reports whether err says the node reset the
// connection (a QUIC stateless reset): it keeps no state of it, having
// restarted or lost it. Requests without a reply on it were not processed
// by the node that reset it; the one before it may have processed those
// it read before it went away.
func IsConnectionReset(err error) bool {
	var reset *quicgo.StatelessResetError
	return errors.As(err, &reset)
}

// OpenStream opens a bidirectional stream, waiting while the node's
// stream limit is reached.
func (c *ClientConn) OpenStream(ctx context.Context) (*ClientStream, error) {
	qs, err := c.qc.OpenStreamSync(ctx)
	if err != nil {
		if cerr := c.qc.Context().Err(); cerr != nil {
			return nil, mapError(context.Cause(c.qc.Context()))
		}
		return nil, mapError(err)
	}
	return &ClientStream{
		c:  c,
		qs: qs,
		fr: newFrameReader(qs, c.cfg.Framing, c.cfg.MaxFrameSize),
		bw: writeBuffer{w: qs},
	}, nil
}

// Context returns a context that ends when the connection closes; its
// cause, through [ClientConn.Err], says why.
func (c *ClientConn) Context() context.Context { return c.qc.Context() }

// Err returns why the connection closed (a *[CloseError] when the node
// closed it with a code), or nil while it is open.
func (c *ClientConn) Err() error {
	ctx := c.qc.Context()
	if ctx.Err() == nil {
		return nil
	}
	return mapError(context.Cause(ctx))
}

// RemoteAddr returns the node's address.
func (c *ClientConn) RemoteAddr() net.Addr { return c.qc.RemoteAddr() }

// LocalAddr returns the local address.
func (c *ClientConn) LocalAddr() net.Addr { return c.qc.LocalAddr() }

// TLS returns the connection's TLS state.
func (c *ClientConn) TLS() tls.ConnectionState { return c.qc.ConnectionState().TLS }

// Close closes the connection with CodeNoError. Requests without a reply
// are abandoned.
func (c *ClientConn) Close() error {
	return c.qc.CloseWithError(quicgo.ApplicationErrorCode(CodeNoError), "")
}

// ClientStream is a client's bidirectional stream: request frames out,
// reply frames in. One goroutine reads; writes are safe for concurrent use.
type ClientStream struct {
	c  *ClientConn
	qs *quicgo.Stream
	fr *frameReader

	wmu     sync.Mutex
	bw      writeBuffer // pooled: held only while it holds bytes
	wclosed bool
}

// ID returns the QUIC stream id.
func (s *ClientStream) ID() int64 { return int64(s.qs.StreamID()) }

// WriteFrame buffers one whole frame (header included); Flush sends it.
func (s *ClientStream) WriteFrame(frame []byte) error {
	if err := checkFrame(s.c.cfg.Framing, frame, 0); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wclosed {
		return ErrClosed
	}
	_, err := s.bw.Write(frame)
	return mapError(err)
}

// Flush sends the buffered frames.
func (s *ClientStream) Flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wclosed {
		return ErrClosed
	}
	return mapError(s.bw.Flush())
}

// ReadFrame reads the next reply frame, bounded by MaxFrameSize before
// allocation (a larger one resets the stream and matches
// ErrFrameTooLarge). io.EOF means the node ended the stream: it has
// answered every request it read, so requests still without a reply were
// not processed.
func (s *ClientStream) ReadFrame() ([]byte, error) {
	return s.readFrame(nil)
}

// readFrame is ReadFrame; once a frame's header is read, pick (when set)
// may ask to see the frame's start before the rest is read.
func (s *ClientStream) readFrame(pick func() headHook) ([]byte, error) {
	n, err := s.fr.readHeader()
	if err == nil {
		var head headHook
		if pick != nil {
			head = pick()
		}
		var frame []byte
		if frame, err = s.fr.readBody(n, head); err == nil {
			return frame, nil
		}
	}
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case errors.Is(err, ErrFrameTooLarge):
		s.Reset(CodeFrameTooLarge)
		return nil, err
	case errors.Is(err, ErrProtocol):
		s.Reset(CodeProtocolError)
		return nil, err
	}
	if ctx := s.c.qc.Context(); ctx.Err() != nil {
		return nil, mapError(context.Cause(ctx))
	}
	return nil, mapError(err)
}

// CloseWrite flushes and ends the send side. The node answers what it
// read, then ends its side: read until io.EOF.
func (s *ClientStream) CloseWrite() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wclosed {
		return nil
	}
	s.wclosed = true
	err := s.bw.Flush()
	if cerr := s.qs.Close(); err == nil {
		err = cerr
	}
	return mapError(err)
}

// Reset aborts both directions with code.
func (s *ClientStream) Reset(code Code) {
	s.qs.CancelRead(quicgo.StreamErrorCode(code))
	s.wmu.Lock()
	s.wclosed = true
	s.qs.CancelWrite(quicgo.StreamErrorCode(code))
	s.wmu.Unlock()
}
