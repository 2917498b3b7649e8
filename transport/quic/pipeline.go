package quic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Pipeline sends requests on one stream without waiting for replies and
// matches replies to requests in order (the node answers in request
// order). Up to depth requests are in flight; Send waits beyond that.
// A writer goroutine coalesces frames that queue up into one flush; it
// starts with the first frame that queues, so a stream whose requests
// are small and one at a time (a device's long poll) never has one.
type Pipeline struct {
	s      *ClientStream
	window chan struct{} // one token per request in flight
	sendq  chan []byte
	stop   chan struct{} // ends the writer
	readerDone,
	writerDone chan struct{}

	// wmu is held while frames are written to the stream: by the writer,
	// or by a Send writing its own frame (inlineWriteMax).
	wmu sync.Mutex

	mu      sync.Mutex
	pending []*call // written or queued, awaiting replies, in order
	queued  int     // frames handed to the writer and not yet flushed
	err     error   // terminal: every later Send fails with it
	sendErr error   // why writing stopped, reported with unanswered requests
	closing bool
	idle    chan struct{} // closed when pending drains, when set
	writing bool          // the writer goroutine was started (or may no longer be)

	closeOnce sync.Once
	closeErr  error
	stopOnce  sync.Once
}

type call struct {
	cb   func(reply []byte, err error)
	head headHook
}

// NotProcessedError is the error of a request that got no reply because
// the stream ended first. The node answers in request order and answers
// everything it read before ending a stream, so the request was never
// read: resending it is safe. Cause, when set, says why the stream ended.
type NotProcessedError struct{ Cause error }

func (e *NotProcessedError) Error() string {
	if e.Cause == nil {
		return "quic: request not processed: the stream ended before its reply"
	}
	return fmt.Sprintf("quic: request not processed: the stream ended before its reply: %v", e.Cause)
}

// Is matches ErrNotProcessed.
func (e *NotProcessedError) Is(target error) bool { return target == ErrNotProcessed }

// Unwrap returns the cause.
func (e *NotProcessedError) Unwrap() error { return e.Cause }

// NewPipeline starts a pipeline on s with at most depth requests in flight
// (at least 1). The pipeline owns s from now on.
func NewPipeline(s *ClientStream, depth int) *Pipeline {
	depth = max(depth, 1)
	p := &Pipeline{
		s:          s,
		window:     make(chan struct{}, depth),
		sendq:      make(chan []byte, depth),
		stop:       make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	go p.reader()
	return p
}

// Send queues frame (a whole frame, header included) and returns once it
// is queued; cb receives the reply or the request's error. Callbacks run
// one at a time, in request order, on the pipeline's reader goroutine:
// they must not block. Send waits while depth requests are in flight.
// When Send returns an error, cb is not called.
func (p *Pipeline) Send(ctx context.Context, frame []byte, cb func(reply []byte, err error)) error {
	return p.send(ctx, frame, cb, headHook{})
}

// SendHead is Send, and when the reply frame is longer than headLen bytes
// (header included), head sees its first headLen bytes on the reader
// goroutine before the rest is read; like cb, it must not block, and the
// bytes are only valid during the call. A consumer learns from the start
// of a large reply where its next request starts, and sends it while the
// rest of the reply is still on its way.
func (p *Pipeline) SendHead(ctx context.Context, frame []byte, headLen int, head func(start []byte), cb func(reply []byte, err error)) error {
	return p.send(ctx, frame, cb, headHook{len: headLen, fn: head})
}

func (p *Pipeline) send(ctx context.Context, frame []byte, cb func(reply []byte, err error), head headHook) error {
	if err := checkFrame(p.s.c.cfg.Framing, frame, 0); err != nil {
		return err
	}
	select {
	case p.window <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-p.readerDone:
		return p.terminalErr()
	}
	p.mu.Lock()
	if p.err != nil || p.closing {
		err := p.err
		if err == nil {
			err = ErrClosed
		}
		p.mu.Unlock()
		<-p.window
		return err
	}
	p.pending = append(p.pending, &call{cb: cb, head: head})
	if len(frame) <= inlineWriteMax && p.queued == 0 && p.wmu.TryLock() {
		// Nothing is waiting to be written before this frame, and nobody
		// is writing: write it here rather than wake the writer.
		p.mu.Unlock()
		err := p.s.WriteFrame(frame)
		if err == nil {
			err = p.s.Flush()
		}
		p.wmu.Unlock()
		if err != nil {
			p.writeFailed(err)
		}
		return nil
	}
	p.queued++
	p.sendq <- frame // never blocks: at most depth frames are in flight
	if !p.writing {
		p.writing = true
		go p.writer()
	}
	p.mu.Unlock()
	return nil
}

// inlineWriteMax is the largest frame Send writes itself when the stream
// is idle, sparing a one-request-at-a-time caller the hand-off to the
// writer goroutine. Larger frames (a producer's batches) always go
// through the writer, so that their caller builds the next one while
// QUIC takes this one.
const inlineWriteMax = 16 << 10

// Do sends frame and waits for its reply. When ctx ends first, Do returns
// ctx's error and the request may still have been processed.
func (p *Pipeline) Do(ctx context.Context, frame []byte) ([]byte, error) {
	type result struct {
		reply []byte
		err   error
	}
	ch := make(chan result, 1)
	if err := p.Send(ctx, frame, func(reply []byte, err error) { ch <- result{reply, err} }); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.reply, r.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Close stops accepting requests, waits for the replies of those in
// flight, ends the stream's send side and waits for the node to end its
// side. When ctx ends first, the stream is reset and ctx's error returned.
func (p *Pipeline) Close(ctx context.Context) error {
	p.closeOnce.Do(func() { p.closeErr = p.close(ctx) })
	return p.closeErr
}

func (p *Pipeline) close(ctx context.Context) error {
	if idle := p.stopAccepting(); idle != nil {
		select {
		case <-idle:
		case <-p.readerDone:
		case <-ctx.Done():
			p.abort()
			return context.Cause(ctx)
		}
	}
	p.stopWriter()
	if err := p.s.CloseWrite(); err != nil && p.terminalErr() == nil {
		p.abort()
		return err
	}
	select {
	case <-p.readerDone:
	case <-ctx.Done():
		p.abort()
		return context.Cause(ctx)
	}
	// The node ending its side after the last reply is the normal end.
	if err := p.terminalErr(); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotProcessed) {
		return err
	}
	return nil
}

// CloseSend stops accepting requests and, once those in flight are
// answered, ends the stream's send side (FIN); it returns at once. The
// node answers what it read, ends its side after the last reply, and the
// pipeline's goroutines end then: an idle stream costs neither side a
// goroutine. Unlike Close, it never resets the stream, so no reply is
// lost, and it waits for nothing; the requests still in flight get their
// replies as usual. A later Close waits for the node's end.
func (p *Pipeline) CloseSend() {
	idle := p.stopAccepting()
	if idle == nil {
		p.endSend()
		return
	}
	// Only a caller that stopped waiting for its reply leaves one in
	// flight: the stream ends when that reply has come.
	go func() {
		select {
		case <-idle:
		case <-p.readerDone:
		}
		p.endSend()
	}()
}

// stopAccepting refuses later requests and returns a channel closed once
// those in flight are answered, or nil when none are.
func (p *Pipeline) stopAccepting() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closing = true
	if len(p.pending) == 0 || p.err != nil {
		return nil
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	return p.idle
}

// endSend stops the writer, once every request is answered (so every
// frame was written), and ends the send side.
func (p *Pipeline) endSend() {
	p.stopWriter()
	_ = p.s.CloseWrite()
}

func (p *Pipeline) abort() {
	p.s.Reset(CodeStreamClosed)
	p.stopWriter()
	<-p.readerDone
}

// stopWriter ends the writer, when one was started, and keeps another
// from starting. Callers have stopped accepting requests first.
func (p *Pipeline) stopWriter() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.mu.Lock()
	if !p.writing {
		p.writing = true
		close(p.writerDone) // none ran, none will
	}
	p.mu.Unlock()
	<-p.writerDone
}

func (p *Pipeline) terminalErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *Pipeline) writer() {
	defer close(p.writerDone)
	for {
		var f []byte
		select {
		case f = <-p.sendq:
		case <-p.stop:
			return
		case <-p.readerDone:
			return
		}
		p.wmu.Lock()
		p.write(f)
		n := 1
	batch:
		for {
			select {
			case f := <-p.sendq:
				p.write(f)
				n++
			default:
				break batch
			}
		}
		if err := p.s.Flush(); err != nil {
			p.writeFailed(err)
		}
		p.mu.Lock()
		p.queued -= n
		p.mu.Unlock()
		p.wmu.Unlock()
	}
}

func (p *Pipeline) write(frame []byte) {
	if err := p.s.WriteFrame(frame); err != nil {
		p.writeFailed(err)
	}
}

// writeFailed records why sending stopped. Requests already sent may still
// be answered, so they wait for the reader.
func (p *Pipeline) writeFailed(err error) {
	p.mu.Lock()
	if p.sendErr == nil {
		p.sendErr = err
	}
	p.mu.Unlock()
}

func (p *Pipeline) reader() {
	defer close(p.readerDone)
	pick := func() headHook {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.pending) == 0 {
			return headHook{}
		}
		return p.pending[0].head
	}
	for {
		reply, err := p.s.readFrame(pick)
		if err != nil {
			p.fail(err)
			return
		}
		p.mu.Lock()
		if len(p.pending) == 0 {
			p.mu.Unlock()
			p.s.Reset(CodeProtocolError)
			p.fail(fmt.Errorf("%w: a reply without a request", ErrProtocol))
			return
		}
		c := p.pending[0]
		p.pending[0] = nil
		p.pending = p.pending[1:]
		if len(p.pending) == 0 && p.idle != nil {
			close(p.idle)
			p.idle = nil
		}
		p.mu.Unlock()
		c.cb(reply, nil)
		<-p.window
	}
}

// fail ends the pipeline: every unanswered request gets the error (an end
// of stream means they were not processed), and so does every later Send.
func (p *Pipeline) fail(err error) {
	p.mu.Lock()
	var reset *StreamResetError
	switch {
	case err == io.EOF:
		err = &NotProcessedError{Cause: p.sendErr}
	case errors.As(err, &reset) && reset.Remote && endsAfterReplies(reset.Code):
		err = &NotProcessedError{Cause: err}
	}
	if p.err == nil {
		p.err = err
	}
	pending := p.pending
	p.pending = nil
	if p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
	if _, ok := err.(*NotProcessedError); ok && reset == nil {
		// The node ended its side after its last reply: confirm we read it.
		// (In its own goroutine: the writer may hold the stream while a
		// write waits for flow control.)
		go func() { _ = p.s.CloseWrite() }()
	}
	for _, c := range pending {
		c.cb(nil, err)
		<-p.window
	}
	// Frames still queued for writing have no reply to wait for.
	for {
		select {
		case <-p.sendq:
		default:
			return
		}
	}
}

// endsAfterReplies reports whether a node resets a stream with code only
// after every request it read was answered (or never read any).
func endsAfterReplies(code Code) bool {
	return code == CodeFrameTooLarge || code == CodeProtocolError || code == CodeShutdown
}
