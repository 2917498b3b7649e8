package quic

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	quicgo "github.com/quic-go/quic-go"
)

// Conn is an authenticated server-side connection. Its streams carry
// requests; the connection is closed by the client, by [Conn.Close], by
// [Listener.CloseToken], or by the listener's shutdown.
type Conn struct {
	l  *Listener
	qc *quicgo.Conn
	id Identity // set before the connection is handed to Accept

	mu        sync.Mutex
	first     *Stream // the authentication stream, returned by the first AcceptStream
	delivered bool
	draining  bool
	accepting []*acceptCall // AcceptStream calls under way: a drain ends them
	streams   map[*Stream]struct{}
}

// acceptCall is an AcceptStream under way. A drain cancels it directly:
// a context watching for the drain (context.AfterFunc on a context of
// the connection's own) cost every idle connection 0.7 KB, its acceptor
// being always under way.
type acceptCall struct{ cancel context.CancelCauseFunc }

func newConn(l *Listener, qc *quicgo.Conn) *Conn {
	return &Conn{l: l, qc: qc, streams: make(map[*Stream]struct{})}
}

// Identity returns what authentication established.
func (c *Conn) Identity() Identity { return c.id }

// RemoteAddr returns the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.qc.RemoteAddr() }

// TLS returns the connection's TLS state.
func (c *Conn) TLS() tls.ConnectionState { return c.qc.ConnectionState().TLS }

// Context returns a context that ends when the connection is closed.
func (c *Conn) Context() context.Context { return c.qc.Context() }

// AcceptStream returns the next stream the client opened. The first call
// returns the authentication stream, positioned after the authentication
// frame. It returns ErrServerClosed once the listener is shutting down,
// and a *[CloseError] (or another error) once the connection is gone.
func (c *Conn) AcceptStream(ctx context.Context) (*Stream, error) {
	c.mu.Lock()
	if s := c.first; s != nil {
		c.first = nil
		c.mu.Unlock()
		return s, nil
	}
	if c.draining {
		c.mu.Unlock()
		return nil, ErrServerClosed
	}
	actx, cancel := context.WithCancelCause(ctx)
	call := &acceptCall{cancel: cancel}
	c.accepting = append(c.accepting, call)
	c.mu.Unlock()
	qs, err := c.qc.AcceptStream(actx)
	c.accepted(call)
	stopped := context.Cause(actx) // the caller's context or a drain, when either ended the call
	cancel(nil)
	if err != nil {
		if c.qc.Context().Err() != nil {
			return nil, mapError(context.Cause(c.qc.Context()))
		}
		if stopped != nil {
			return nil, stopped
		}
		return nil, mapError(err)
	}
	s := c.track(qs)
	if s == nil {
		qs.CancelRead(quicgo.StreamErrorCode(CodeShutdown))
		qs.CancelWrite(quicgo.StreamErrorCode(CodeShutdown))
		return nil, ErrServerClosed
	}
	return s, nil
}

// accepted forgets an AcceptStream call that returned.
func (c *Conn) accepted(call *acceptCall) {
	c.mu.Lock()
	if i := slices.Index(c.accepting, call); i >= 0 {
		c.accepting = slices.Delete(c.accepting, i, i+1)
	}
	c.mu.Unlock()
}

// Close closes the connection with code and reason (at most 256 bytes are
// sent). Requests in flight on it get no reply.
func (c *Conn) Close(code Code, reason string) error {
	c.close(code, reason)
	return nil
}

func (c *Conn) close(code Code, reason string) {
	_ = c.qc.CloseWithError(quicgo.ApplicationErrorCode(code), truncateReason(reason))
}

// track wraps and records a new stream; it returns nil while draining.
func (c *Conn) track(qs *quicgo.Stream) *Stream {
	s := &Stream{
		c:           c,
		qs:          qs,
		fr:          newFrameReader(qs, c.l.cfg.Framing, c.l.cfg.MaxFrameSize),
		outstanding: make(map[*Request]struct{}),
	}
	s.bw.w = streamWriter{s}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return nil
	}
	c.streams[s] = struct{}{}
	c.l.stats.streamsAccepted.Add(1)
	c.l.stats.streamsOpen.Add(1)
	return s
}

func (c *Conn) untrack(s *Stream) {
	c.mu.Lock()
	if _, ok := c.streams[s]; ok {
		delete(c.streams, s)
		c.l.stats.streamsOpen.Add(-1)
	}
	c.mu.Unlock()
}

func (c *Conn) snapshotStreams() []*Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Stream, 0, len(c.streams))
	for s := range c.streams {
		out = append(out, s)
	}
	return out
}

// gone releases what the connection holds once it is gone. It runs when
// the connection's context ends (context.AfterFunc): a goroutine waiting
// for that would be one more per idle connection. An AcceptStream under
// way returns by itself: quic-go ends it with the connection.
func (c *Conn) gone() {
	for _, s := range c.snapshotStreams() {
		s.finish()
	}
	c.l.forget(c)
}

// Bounds of a drain's linger: how long it waits for a client to confirm
// it read its last replies once they are all sent. A live client confirms
// within a round trip and its acknowledgement delay; one that vanished
// never does.
const (
	minDrainLinger = 100 * time.Millisecond
	maxDrainLinger = 500 * time.Millisecond
)

// drainLinger is the connection's linger: a floor for the peer's
// acknowledgement delay and scheduling, plus a few smoothed round trips.
func (c *Conn) drainLinger() time.Duration {
	st := c.qc.ConnectionStats()
	return min(maxDrainLinger, minDrainLinger+3*st.SmoothedRTT+4*st.MeanDeviation)
}

// drain ends the connection gracefully: each stream answers what it read,
// sends its end, and waits (for at most the linger) for the client to read
// it; then the connection closes with CodeShutdown. A stream whose last
// replies the client cannot confirm (it had closed its side before them)
// makes the connection wait for the client to close it, for the linger
// again at most. A client that does not answer in the linger is taken as
// gone: it is not waited on.
func (c *Conn) drain(ctx context.Context) {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return // a drain is under way
	}
	c.draining = true
	delivered := c.delivered
	calls := c.accepting
	c.accepting = nil
	c.mu.Unlock()
	for _, call := range calls {
		call.cancel(ErrServerClosed)
	}
	if !delivered {
		c.close(CodeShutdown, "server shutting down")
		return
	}
	linger := c.drainLinger()
	var wg sync.WaitGroup
	var unconfirmed, noAnswer atomic.Bool
	for _, s := range c.snapshotStreams() {
		wg.Go(func() {
			switch s.drain(ctx, linger) {
			case drainUnconfirmed:
				unconfirmed.Store(true)
			case drainNoAnswer:
				noAnswer.Store(true)
			}
		})
	}
	stop := make(chan struct{})
	go c.watchSilentClient(linger, stop)
	wg.Wait()
	close(stop)
	if unconfirmed.Load() && !noAnswer.Load() && ctx.Err() == nil {
		t := time.NewTimer(linger)
		select {
		case <-c.qc.Context().Done():
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	c.close(CodeShutdown, "server shutting down")
}

// watchSilentClient closes the draining connection when a write to one of
// its streams has waited for a whole linger in which the client sent no
// packet: a reply beyond the client's flow-control window waits for
// credit, and a client that vanished (killed, unplugged) never grants it,
// nor acknowledges what was sent. A live client acknowledges within the
// linger. It returns at stop or when the connection ends.
func (c *Conn) watchSilentClient(linger time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(linger)
	defer t.Stop()
	heard := c.qc.ConnectionStats().PacketsReceived
	waiting := map[*Stream]uint64{}
	for {
		select {
		case <-stop:
			return
		case <-c.qc.Context().Done():
			return
		case <-t.C:
		}
		now := c.qc.ConnectionStats().PacketsReceived
		still := map[*Stream]uint64{}
		stuck := false
		for _, s := range c.snapshotStreams() {
			if w := s.waitingWrite(); w != 0 {
				still[s] = w
				stuck = stuck || waiting[s] == w
			}
		}
		if stuck && now == heard {
			c.close(CodeShutdown, "server shutting down: the client does not answer")
			return
		}
		heard, waiting = now, still
	}
}
