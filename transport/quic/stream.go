package quic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	quicgo "github.com/quic-go/quic-go"
)

// Stream is a server-side bidirectional stream: a sequence of request
// frames in, a sequence of reply frames out, replies in request order.
//
// One goroutine reads ([Stream.ReadFrame]); writes ([Stream.WriteFrame],
// [Stream.Flush], [Stream.Reply]) are safe from any goroutine. The usual
// loop reads until ReadFrame fails, answers what it read, then calls
// [Stream.Close].
type Stream struct {
	c  *Conn
	qs *quicgo.Stream
	fr *frameReader

	wmu      sync.Mutex
	bw       writeBuffer // pooled: held only while it holds bytes
	wclosed  bool
	deferred []*Request    // answered by WriteReply, released at the next flush
	dirty    atomic.Bool   // deferred is not empty
	writes   atomic.Uint64 // writes to the QUIC stream begun...
	written  atomic.Uint64 // ...and returned: a shutdown watches one that waits

	mu            sync.Mutex
	reading       bool // inside ReadFrame
	inHeader      bool // waiting for a frame header: shutdown may interrupt it
	draining      bool
	done          bool // finished: budget released, no longer tracked
	readEOF       bool // the client closed its side
	readBroken    bool // reading stopped after a bad frame...
	brokenCode    Code // ...with this code, which also ends the send side
	wroteAfterEOF bool // replies written after the client closed its side
	outstanding   map[*Request]struct{}
	watch         chan struct{} // closed on the next state change, when set
}

// Request is one frame read from a stream. Its bytes count against the
// listener's in-flight budget until [Request.Release] (or [Stream.Reply]).
//
// Requests are reused: Release is the holder's last use of one. From
// ReadFrame to Release the request is its caller's (or the stream's,
// once handed to Reply or WriteReply, which release it); after Release
// the transport may hand the same *Request out for a later frame, so
// nothing may keep it, or call Release again. A request released by its
// stream's end (the stream or connection went away first) is not reused:
// its holder's Release is then a no-op, as before.
type Request struct {
	// Frame is the whole frame, header included. It belongs to the
	// caller, who may hand it back with RecycleFrame once done with it.
	Frame []byte

	s        *Stream
	n        int64
	released bool // guarded by s.mu
}

// requestPool holds the requests between two frames. A Request a frame
// was one allocation of every request read, a device's produce included:
// at 5,000 devices a record a second, 5,000 a second.
var requestPool = sync.Pool{New: func() any { return new(Request) }}

// newRequest is a request for frame of n bytes (its budget) on s.
func newRequest(s *Stream, frame []byte, n int) *Request {
	r := requestPool.Get().(*Request)
	*r = Request{Frame: frame, s: s, n: int64(n)}
	return r
}

// Stream returns the stream the request arrived on.
func (r *Request) Stream() *Stream { return r.s }

// Release gives the request's bytes back to the in-flight budget. Call it
// once, when the reply was sent (Reply does); the request may be reused
// after it. Requests still held when their stream or connection ends are
// released then, and their holder's Release does nothing.
func (r *Request) Release() {
	if r == nil {
		return
	}
	s := r.s
	s.mu.Lock()
	if r.released {
		s.mu.Unlock()
		return
	}
	r.released = true
	delete(s.outstanding, r)
	s.notifyLocked()
	s.mu.Unlock()
	s.c.l.budget.release(r.n)
	s.c.l.stats.requestsInFlight.Add(-1)
	*r = Request{}
	requestPool.Put(r)
}

// ID returns the QUIC stream id.
func (s *Stream) ID() int64 { return int64(s.qs.StreamID()) }

// Conn returns the stream's connection.
func (s *Stream) Conn() *Conn { return s.c }

// ReadFrame reads the next request. Its length is checked against
// MaxFrameSize before anything is allocated, and its bytes are taken from
// the in-flight budget before its body is read: past the budget ReadFrame
// waits, and QUIC flow control holds the client back.
//
// Errors: io.EOF when the client closed its side between frames;
// ErrServerClosed once the listener is shutting down (frames the client
// sent after that are not read, and never answered); an error matching
// ErrFrameTooLarge or ErrProtocol after a bad frame (the transport has
// stopped reading the stream with that code; earlier requests can still be
// answered); otherwise the stream's or connection's error.
func (s *Stream) ReadFrame() (*Request, error) {
	s.mu.Lock()
	switch {
	case s.done:
		s.mu.Unlock()
		return nil, s.goneError()
	case s.draining || s.c.l.drainFlag.Load():
		s.mu.Unlock()
		return nil, ErrServerClosed
	case s.readEOF:
		s.mu.Unlock()
		return nil, io.EOF
	case s.readBroken:
		err := codeSentinel(s.brokenCode)
		s.mu.Unlock()
		return nil, err
	}
	s.reading, s.inHeader = true, true
	s.mu.Unlock()

	req, err := s.readFrame()

	s.mu.Lock()
	s.reading, s.inHeader = false, false
	if req != nil {
		s.outstanding[req] = struct{}{}
		if s.done { // the connection went away meanwhile
			s.mu.Unlock()
			req.Release()
			return nil, s.goneError()
		}
	}
	if err == io.EOF {
		s.readEOF = true
	}
	s.notifyLocked()
	s.mu.Unlock()
	return req, err
}

func (s *Stream) readFrame() (*Request, error) {
	if s.fr.buffered() < s.fr.framing.HeaderLen {
		s.flushDeferred() // about to wait for the network
	}
	n, err := s.fr.readHeader()
	s.mu.Lock()
	s.inHeader = false
	interrupted := s.draining
	s.mu.Unlock()
	// A header read in full before the stream's drain began is a request
	// in flight, even when the listener's drain has begun.
	l := s.c.l
	if err != nil {
		var tooLarge *FrameTooLargeError
		switch {
		case err == io.EOF:
			return nil, io.EOF
		case interrupted && isTimeout(err):
			return nil, ErrServerClosed
		case errors.As(err, &tooLarge):
			l.stats.framesTooLarge.Add(1)
			s.stopReading(CodeFrameTooLarge)
			return nil, err
		case errors.Is(err, ErrProtocol):
			l.stats.protocolErrors.Add(1)
			s.stopReading(CodeProtocolError)
			return nil, err
		}
		return nil, mapError(err)
	}
	if interrupted {
		// The header arrived before the shutdown: this request is in
		// flight and is read and answered, if its body comes within the
		// linger (a client that stopped mid-frame is gone).
		_ = s.qs.SetReadDeadline(time.Now().Add(s.c.drainLinger()))
	}
	if !l.budget.tryAcquire(int64(n)) {
		// Deferred replies hold budget: send them before waiting for it.
		s.flushDeferred()
		if _, err := l.budget.acquire(s.c.qc.Context(), int64(n), l.cfg.OnBackpressure); err != nil {
			return nil, s.goneError()
		}
	}
	if s.fr.buffered() < n-s.fr.framing.HeaderLen {
		s.flushDeferred()
	}
	frame, err := s.fr.readBody(n, headHook{})
	if err != nil {
		l.budget.release(int64(n))
		if errors.Is(err, ErrProtocol) {
			l.stats.protocolErrors.Add(1)
			s.stopReading(CodeProtocolError)
			return nil, err
		}
		return nil, mapError(err)
	}
	l.stats.framesRead.Add(1)
	l.stats.bytesRead.Add(uint64(n))
	l.stats.requestsInFlight.Add(1)
	return newRequest(s, frame, n), nil
}

// stopReading tells the client to stop sending (STOP_SENDING with code);
// the write side stays open for the replies of earlier requests.
func (s *Stream) stopReading(code Code) {
	s.mu.Lock()
	s.readBroken, s.brokenCode = true, code
	s.mu.Unlock()
	s.qs.CancelRead(quicgo.StreamErrorCode(code))
}

// goneError is the error of a stream whose connection or life ended.
func (s *Stream) goneError() error {
	if ctx := s.c.qc.Context(); ctx.Err() != nil {
		return mapError(context.Cause(ctx))
	}
	return ErrClosed
}

// WriteFrame buffers one whole frame (header included) for sending; Flush
// sends what is buffered. Safe for concurrent use; frames are not
// interleaved.
func (s *Stream) WriteFrame(frame []byte) error {
	if err := checkFrame(s.c.l.cfg.Framing, frame, 0); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.writeLocked(frame)
}

func (s *Stream) writeLocked(frame []byte) error {
	if s.wclosed {
		return ErrClosed
	}
	s.mu.Lock()
	if s.readEOF {
		s.wroteAfterEOF = true
	}
	s.mu.Unlock()
	_, err := s.bw.Write(frame)
	return mapError(err)
}

// directWriteSize is the size from which WriteFrameParts hands a part to
// the QUIC stream as it is rather than copying it into the buffer.
const directWriteSize = 16 << 10

// WriteFrameParts buffers one frame given as parts that, back to back, are
// the whole frame (the first holding at least its header), like
// WriteFrame. Large parts are not copied into the buffer: what is buffered
// is sent and the part is written to the stream as it is (QUIC copies it
// into packets), so a reply of stored batches goes out without being
// joined first. The parts must not change until the call returns.
func (s *Stream) WriteFrameParts(parts [][]byte) error {
	if err := checkFrameParts(s.c.l.cfg.Framing, parts); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wclosed {
		return ErrClosed
	}
	s.mu.Lock()
	if s.readEOF {
		s.wroteAfterEOF = true
	}
	s.mu.Unlock()
	for _, p := range parts {
		if len(p) < directWriteSize || len(p) < s.bw.Available() {
			if _, err := s.bw.Write(p); err != nil {
				return mapError(err)
			}
			continue
		}
		if err := s.bw.Flush(); err != nil {
			return mapError(err)
		}
		if _, err := (streamWriter{s}).Write(p); err != nil {
			return mapError(err)
		}
	}
	return nil
}

// checkFrameParts verifies that parts, back to back, are exactly one frame.
func checkFrameParts(f Framing, parts [][]byte) error {
	if len(parts) == 0 || len(parts[0]) < f.HeaderLen {
		return fmt.Errorf("%w: the first part of a frame must hold its header", ErrProtocol)
	}
	n, err := f.FrameLen(parts[0][:f.HeaderLen])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if n != total {
		return fmt.Errorf("%w: header says %d bytes, parts have %d", ErrProtocol, n, total)
	}
	return nil
}

// Flush sends the buffered frames.
func (s *Stream) Flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wclosed {
		return ErrClosed
	}
	return s.flushLocked()
}

func (s *Stream) flushLocked() error {
	err := mapError(s.bw.Flush())
	if len(s.deferred) > 0 {
		for i, r := range s.deferred {
			r.Release()
			s.deferred[i] = nil
		}
		s.deferred = s.deferred[:0]
		s.dirty.Store(false)
	}
	return err
}

// flushDeferred sends replies written by WriteReply, if any.
func (s *Stream) flushDeferred() {
	if !s.dirty.Load() {
		return
	}
	s.wmu.Lock()
	if !s.wclosed {
		_ = s.flushLocked()
	}
	s.wmu.Unlock()
}

// Reply writes frame, flushes, and releases req.
func (s *Stream) Reply(req *Request, frame []byte) error {
	defer req.Release()
	if err := checkFrame(s.c.l.cfg.Framing, frame, 0); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writeLocked(frame); err != nil {
		return err
	}
	return s.flushLocked()
}

// WriteReply buffers frame as req's reply without flushing: the reply is
// sent, and req released, at the next flush, which happens at the latest
// when ReadFrame is about to wait for the network or for budget. Replies
// to a burst of pipelined requests then leave in one write. Call it only
// from the goroutine that calls ReadFrame (a reply written elsewhere
// while ReadFrame waits would stay buffered); elsewhere use Reply, or
// WriteFrame and Flush.
func (s *Stream) WriteReply(req *Request, frame []byte) error {
	if err := checkFrame(s.c.l.cfg.Framing, frame, 0); err != nil {
		req.Release()
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writeLocked(frame); err != nil {
		req.Release()
		return err
	}
	s.deferred = append(s.deferred, req)
	s.dirty.Store(true)
	return nil
}

// Close flushes, ends the send side (the client reads the end after the
// last reply), discards whatever the client still sends, and releases the
// requests not yet released. While the listener is shutting down, the
// shutdown finishes the stream instead, once the client has read the end.
func (s *Stream) Close() error {
	err := s.endWrite()
	s.mu.Lock()
	if s.draining || s.done || s.c.l.drainFlag.Load() {
		s.mu.Unlock()
		return err
	}
	eof := s.readEOF
	s.mu.Unlock()
	if !eof {
		s.qs.CancelRead(quicgo.StreamErrorCode(CodeStreamClosed))
	}
	s.finish()
	return err
}

// endWrite flushes and ends the send side: with a FIN normally; after a
// bad frame, with a reset carrying its code at a reliable boundary, so the
// client reads every reply written so far and then learns why the stream
// ended (when the client supports partial-delivery resets; otherwise FIN).
func (s *Stream) endWrite() error {
	s.mu.Lock()
	code := s.brokenCode
	s.mu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wclosed {
		return nil
	}
	err := s.flushLocked()
	s.wclosed = true
	if code != CodeNoError && err == nil && s.c.qc.ConnectionState().SupportsStreamResetPartialDelivery.Remote {
		s.qs.SetReliableBoundary()
		s.qs.CancelWrite(quicgo.StreamErrorCode(code))
		return nil
	}
	_ = s.qs.Close()
	return err
}

// Reset aborts both directions of the stream with code; unsent replies are
// dropped.
func (s *Stream) Reset(code Code) {
	s.qs.CancelRead(quicgo.StreamErrorCode(code))
	s.wmu.Lock()
	s.wclosed = true
	s.qs.CancelWrite(quicgo.StreamErrorCode(code))
	s.wmu.Unlock()
	s.finish()
}

// finish releases what the stream holds and forgets it. Idempotent.
func (s *Stream) finish() {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done = true
	// Released here, under s.mu, so that a holder's Release racing this
	// one finds them released and leaves them alone: neither reuses a
	// request the other still holds.
	var bytes, count int64
	for r := range s.outstanding {
		r.released = true
		bytes += r.n
		count++
	}
	clear(s.outstanding)
	s.notifyLocked()
	s.mu.Unlock()
	if count > 0 {
		s.c.l.budget.release(bytes)
		s.c.l.stats.requestsInFlight.Add(-count)
	}
	s.c.untrack(s)
}

func (s *Stream) notifyLocked() {
	if s.watch != nil {
		close(s.watch)
		s.watch = nil
	}
}

// drainResult says how a stream's drain ended.
type drainResult int

const (
	// drainConfirmed: the client ended its side after reading every reply.
	drainConfirmed drainResult = iota
	// drainUnconfirmed: replies were written after the client had ended
	// its side, so the client cannot say it read them.
	drainUnconfirmed
	// drainNoAnswer: the client did not end its side within the linger
	// (it vanished, or keeps its side open): it is not waited on further.
	drainNoAnswer
)

// drain ends the stream for a shutdown: no new frame is read (a reader
// waiting for a header is interrupted), requests already read are
// answered, the send side is closed, and the client's end is awaited, for
// at most linger, as the sign it has read every reply. A client that went
// away without closing never sends that end: the linger (a few round
// trips) bounds what a vanished peer costs a shutdown.
func (s *Stream) drain(ctx context.Context, linger time.Duration) drainResult {
	s.mu.Lock()
	s.draining = true
	switch {
	case s.inHeader:
		_ = s.qs.SetReadDeadline(time.Now())
	case s.reading:
		// A frame's header came, its body is still coming: it is waited
		// for the linger at most. A client that vanished mid-frame (killed
		// between two packets) never sends the rest.
		_ = s.qs.SetReadDeadline(time.Now().Add(linger))
	}
	for !s.done && (s.reading || len(s.outstanding) > 0) {
		w := make(chan struct{})
		s.watch = w
		s.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return drainNoAnswer
		}
		s.mu.Lock()
	}
	if s.done {
		s.mu.Unlock()
		return drainConfirmed
	}
	eof, broken, unconfirmed := s.readEOF, s.readBroken, s.wroteAfterEOF
	s.mu.Unlock()

	_ = s.endWrite()

	result := drainConfirmed
	if unconfirmed || broken {
		result = drainUnconfirmed
	}
	if !eof && !broken {
		_ = s.qs.SetReadDeadline(time.Now().Add(linger))
		stop := context.AfterFunc(ctx, func() { _ = s.qs.SetReadDeadline(time.Now()) })
		_, err := io.Copy(io.Discard, s.fr.source())
		stop()
		if err != nil {
			result = drainNoAnswer
		}
	}
	s.finish()
	return result
}

// streamWriter writes to the QUIC stream, counting the writes begun and
// returned: a write that waits (for the client's flow-control credit) is
// seen by a shutdown, which does not wait on a client that went silent.
type streamWriter struct{ s *Stream }

func (w streamWriter) Write(p []byte) (int, error) {
	w.s.writes.Add(1)
	defer w.s.written.Add(1)
	return w.s.qs.Write(p)
}

// waitingWrite returns the number of the write under way (0 for none).
func (s *Stream) waitingWrite() uint64 {
	begun := s.writes.Load()
	if s.written.Load() == begun {
		return 0
	}
	return begun
}
