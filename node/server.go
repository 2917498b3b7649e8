package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// The server side of the protocol (docs/PROTOCOL.md). A connection
// authenticates with its first frame; then every stream is a sequence of
// requests answered in order. A stream's requests are handled one after
// another on the goroutine that reads it; produce, commit and reset return
// once the owner ordered their effects (Owner.OrderProduce, OrderCommit,
// OrderReset) and leave the wait for their durability to the stream's
// writer goroutine, so a produce stream keeps its partition order while
// many appends share one fsync. The writer sends the replies in request
// order, coalescing the flushes of replies that are ready together; a
// reply is ready only once its effects are durable. A reply that is
// ready when its request has been handled, with no earlier reply left to
// the writer, is sent by the reading goroutine itself (replyNow).

// authenticate is the listener's Authenticator: the first frame of a
// connection must be an Authenticate request with a valid token.
func (n *Node) authenticate(_ context.Context, req quic.AuthRequest) (quic.Identity, []byte, error) {
	refuse := func(code quic.Code, msg string) (quic.Identity, []byte, error) {
		return quic.Identity{}, nil, &quic.CloseError{Code: code, Reason: msg}
	}
	f, err := parseFrame(req.Frame)
	if err != nil {
		return refuse(quic.CodeProtocolError, err.Error())
	}
	if f.Kind != wire.KindAuthenticate {
		return refuse(quic.CodeUnauthenticated, fmt.Sprintf("the first request of a connection must be authenticate, not %s", f.Kind))
	}
	var m wire.AuthenticateRequest
	if err := wire.DecodeRequest(f, &m); err != nil {
		return refuse(quic.CodeProtocolError, err.Error())
	}
	rec, err := n.tokens.authenticate(m.Token)
	if err != nil {
		n.log.Info("authentication refused", "remote", req.RemoteAddr, "reason", err)
		return refuse(quic.CodeUnauthenticated, err.Error())
	}
	reply, err := wire.AppendReply(nil, f.ID, &wire.AuthenticateReply{
		TokenID: rec.info.ID, Topic: rec.info.Topic, Scopes: rec.info.Scopes,
		MaxFrameSize: uint32(n.cfg.Transport.MaxFrameSize - wire.FrameHeaderSize),
		NodeVersion:  n.cfg.Version,
	})
	if err != nil {
		return refuse(quic.CodeInternal, err.Error())
	}
	return quic.Identity{TokenID: rec.info.ID, Value: rec}, reply, nil
}

// parseFrame splits a whole frame as the transport reads it.
func parseFrame(b []byte) (wire.Frame, error) {
	h, size, err := wire.ParseFrameHeader(b, len(b))
	if err != nil {
		return wire.Frame{FrameHeader: h}, err
	}
	if size != len(b)-wire.FrameHeaderSize {
		return wire.Frame{FrameHeader: h}, &wire.Error{Status: wire.StatusMalformedRequest, Message: "frame length does not match"}
	}
	return wire.Frame{FrameHeader: h, Body: b[wire.FrameHeaderSize:]}, nil
}

func (n *Node) acceptLoop() {
	for {
		c, err := n.ln.Accept(n.base)
		if err != nil {
			return
		}
		n.work.Go(func() { n.serveConn(c) })
	}
}

// serveConn accepts the streams of one connection.
func (n *Node) serveConn(c *quic.Conn) {
	rec, ok := c.Identity().Value.(*tokenRecord)
	if !ok {
		_ = c.Close(quic.CodeInternal, "connection without identity")
		return
	}
	if rec.revoked.Load() { // revoked between authentication and now
		_ = c.Close(quic.CodeTokenRevoked, "token revoked")
		return
	}
	// The requests of the connection end with it, or at a hard stop. Not
	// when accepting ends: a graceful shutdown stops accepting streams
	// first, and the requests already read are still answered.
	ctx, cancel := context.WithCancel(c.Context())
	defer cancel()
	stop := context.AfterFunc(n.base, cancel)
	defer stop()
	var streams sync.WaitGroup
	defer streams.Wait()
	for {
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		streams.Go(func() { n.serveStream(ctx, rec, s) })
	}
}

// inflight is a request read from a stream and its reply: a frame, or the
// parts of one (a poll reply's stored batches are written as they are),
// or, for a request whose effects were ordered but may not be durable
// yet, finish, which waits for them and returns the reply.
type inflight struct {
	req *quic.Request
	out served
}

// served is what a handler answers: frame, or parts written back to back;
// with finish set, neither yet — finish (called once, in request order)
// waits for the request's effects to be durable and returns the reply,
// and ready, when set, says without waiting whether finish would.
type served struct {
	frame  []byte
	parts  [][]byte
	finish func() served
	ready  func() bool
	// shared is the request's frame when the handler shared it (with
	// the storage engine): the stream drops its share once the reply is
	// written.
	shared *quic.SharedFrame
	// release gives the memory of the stored batches a poll reply's
	// parts refer to back to the engine, once the reply is written.
	release func()
}

// serveStream reads the requests of a stream in order and handles each on
// this goroutine: a request that orders effects (produce, commit, reset)
// returns once they are ordered, leaving the wait for their durability to
// writeReplies, so the next request starts while it waits — a produce
// stream keeps its partition order while many appends share one fsync.
// Replies leave in request order: from writeReplies, or from this
// goroutine when nothing is owed (replyNow).
func (n *Node) serveStream(ctx context.Context, tok *tokenRecord, s *quic.Stream) {
	w := &replyWriter{queue: make(chan *inflight, n.cfg.MaxStreamRequests)}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		n.writeReplies(ctx, s, w)
	}()
	for {
		req, err := s.ReadFrame()
		if err != nil {
			n.streamEnded(s, err)
			break
		}
		f := &inflight{req: req, out: n.handle(ctx, tok, req.Frame)}
		if !n.replyNow(ctx, s, w, f) {
			w.queue <- f
		}
	}
	close(w.queue)
	<-writerDone
	_ = s.Close()
}

// replyWriter is a stream's writer side: the queue of replies for
// writeReplies, and how many of them it has not finished.
type replyWriter struct {
	queue chan *inflight
	// mu guards owed: replies queued and not yet written and flushed by
	// writeReplies. The reading goroutine writes a reply itself only when
	// nothing is owed, so replies keep the request order.
	mu     sync.Mutex
	owed   int
	broken bool // a write or flush failed: later replies are dropped
}

// replyNow writes f's reply from the reading goroutine when it is one
// frame, ready, and no earlier reply is still with the writer, and
// reports whether it did; otherwise it counts f as owed by the writer, to
// which the caller hands it. A one-at-a-time client then gets its reply
// without a hand-off to the writer goroutine and back. A request that
// must wait for its durability, replies behind one, and poll replies
// (written in parts, possibly large) still go through the writer, so the
// stream's next request is read meanwhile.
func (n *Node) replyNow(ctx context.Context, s *quic.Stream, w *replyWriter, f *inflight) bool {
	out := f.out
	if out.parts != nil || (out.finish != nil && (out.ready == nil || !out.ready())) {
		w.mu.Lock()
		w.owed++
		w.mu.Unlock()
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owed > 0 {
		w.owed++
		return false
	}
	if out.finish != nil {
		out = n.finish(ctx, f.req.Frame, out.finish)
	}
	if !w.broken {
		err := writeServed(s, out)
		if err == nil {
			err = s.Flush()
		}
		w.broken = err != nil
	}
	f.done()
	return true
}

// writeServed buffers a reply on s: its one frame, or its parts.
func writeServed(s *quic.Stream, out served) error {
	if out.parts != nil {
		return s.WriteFrameParts(out.parts)
	}
	return s.WriteFrame(out.frame)
}

// done lets go of a request whose reply is written (or dropped with a
// broken stream): its bytes go back to the in-flight budget, and its
// frame, when shared with the engine, loses the stream's share.
func (f *inflight) done() {
	f.req.Release()
	if f.out.shared != nil {
		f.out.shared.Drop()
	}
	if f.out.release != nil {
		f.out.release()
	}
}

// streamEnded logs why a stream stopped being read. The requests read
// before are still answered.
func (n *Node) streamEnded(s *quic.Stream, err error) {
	switch {
	case err == io.EOF, errors.Is(err, quic.ErrServerClosed):
	case errors.Is(err, quic.ErrFrameTooLarge):
		n.log.Info("stream reset: frame too large", "remote", s.Conn().RemoteAddr(), "err", err)
	case errors.Is(err, quic.ErrProtocol):
		n.log.Info("stream reset: malformed frame", "remote", s.Conn().RemoteAddr(), "err", err)
	default:
		n.log.Debug("stream ended", "remote", s.Conn().RemoteAddr(), "err", err)
	}
}

// writeReplies writes each request's reply in request order and releases
// its bytes from the in-flight budget. It flushes when no further reply is
// ready, so replies that complete together leave in one flush; before
// waiting for a request's durability it sends what it holds. Once what it
// was given is flushed, it settles what it owed, so the reading goroutine
// may reply directly again.
func (n *Node) writeReplies(ctx context.Context, s *quic.Stream, w *replyWriter) {
	queue := w.queue
	broken, dirty, written := false, false, 0
	flush := func() {
		if dirty && !broken && s.Flush() != nil {
			broken = true
		}
		dirty = false
	}
	// settle hands the stream back to the reading goroutine once every
	// reply owed so far is written and flushed.
	settle := func() {
		flush()
		w.mu.Lock()
		w.owed -= written
		w.broken = w.broken || broken
		broken = w.broken
		w.mu.Unlock()
		written = 0
	}
	write := func(f *inflight) {
		written++
		out := f.out
		if out.finish != nil {
			if out.ready == nil || !out.ready() {
				flush() // do not hold earlier replies while this one waits
			}
			out = n.finish(ctx, f.req.Frame, out.finish)
		}
		if !broken {
			broken = writeServed(s, out) != nil
			dirty = true
		}
		f.done()
	}
	for f := range queue {
		w.mu.Lock()
		broken = w.broken
		w.mu.Unlock()
		write(f)
	more:
		for {
			select {
			case nf, ok := <-queue:
				if !ok {
					break more
				}
				write(nf)
			default:
				break more
			}
		}
		settle()
	}
	settle()
}

// finish runs a reply's finish, answering with StatusInternal should it
// panic.
func (n *Node) finish(ctx context.Context, frame []byte, fn func() served) (out served) {
	defer func() {
		if p := recover(); p != nil {
			h, _, _ := wire.ParseFrameHeader(frame, len(frame))
			n.log.Error("request handler panicked", "kind", h.Kind, "panic", p, "stack", string(debug.Stack()))
			out = served{frame: wire.AppendErrorReply(nil, h, wire.StatusInternal, "the node failed to handle the request")}
		}
	}()
	return fn()
}

// handle answers one request frame with one reply. It never panics:
// a panic in a handler is logged and answered with StatusInternal.
func (n *Node) handle(ctx context.Context, tok *tokenRecord, frame []byte) (out served) {
	f, err := parseFrame(frame)
	if err != nil {
		return served{frame: errorReply(f.FrameHeader, err)}
	}
	defer func() {
		if p := recover(); p != nil {
			n.log.Error("request handler panicked", "kind", f.Kind, "panic", p, "stack", string(debug.Stack()))
			out = served{frame: wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusInternal, "the node failed to handle the request")}
		}
	}()
	if err := wire.CheckRequest(f.FrameHeader); err != nil {
		return served{frame: errorReply(f.FrameHeader, err)}
	}
	if err := tok.valid(n.cfg.Now()); err != nil {
		return served{frame: errorReply(f.FrameHeader, err)}
	}
	r := &request{n: n, tok: tok, frame: f, raw: frame, deferring: true}
	b := n.dispatch(ctx, r)
	if r.out.finish != nil || r.out.parts != nil {
		r.out.shared = r.shared
		if r.polled != nil {
			r.out.release = r.releasePolled
		}
		return r.out
	}
	r.releasePolled() // the reply, if any, holds copies
	return served{frame: b, shared: r.shared}
}

// dispatch runs the handler of r's kind and returns its reply frame (nil
// when the handler left its reply in r.out).
func (n *Node) dispatch(ctx context.Context, r *request) []byte {
	f := r.frame
	switch f.Kind {
	case wire.KindAuthenticate:
		return errorReply(f.FrameHeader, invalidArgument("the connection is already authenticated"))
	case wire.KindCreateTopic:
		return serve(ctx, r, &wire.CreateTopicRequest{}, r.createTopic)
	case wire.KindDeleteTopic:
		return serve(ctx, r, &wire.DeleteTopicRequest{}, r.deleteTopic)
	case wire.KindListTopics:
		return serve(ctx, r, &wire.ListTopicsRequest{}, r.listTopics)
	case wire.KindDescribeTopic:
		return serve(ctx, r, &wire.DescribeTopicRequest{}, r.describeTopic)
	case wire.KindPurge:
		return serve(ctx, r, &wire.PurgeRequest{}, r.purge)
	case wire.KindGetPartitionState:
		return serve(ctx, r, &wire.GetPartitionStateRequest{}, r.partitionState)
	case wire.KindInitProducer:
		return serve(ctx, r, &wire.InitProducerRequest{}, r.initProducer)
	case wire.KindProduce:
		return serve(ctx, r, &wire.ProduceRequest{}, r.produce)
	case wire.KindAttachConsumer:
		return serve(ctx, r, &wire.AttachConsumerRequest{}, r.attachConsumer)
	case wire.KindPoll:
		return serve(ctx, r, &wire.PollRequest{}, r.poll)
	case wire.KindCommit:
		return serve(ctx, r, &wire.CommitRequest{}, r.commit)
	case wire.KindResetPosition:
		return serve(ctx, r, &wire.ResetPositionRequest{}, r.resetPosition)
	case wire.KindGetCommitted:
		return serve(ctx, r, &wire.GetCommittedRequest{}, r.getCommitted)
	case wire.KindCreateToken:
		return serve(ctx, r, &wire.CreateTokenRequest{}, r.createToken)
	case wire.KindListTokens:
		return serve(ctx, r, &wire.ListTokensRequest{}, r.listTokens)
	case wire.KindRevokeToken:
		return serve(ctx, r, &wire.RevokeTokenRequest{}, r.revokeToken)
	case wire.KindAddPlugin, wire.KindListPlugins, wire.KindRemovePlugin, wire.KindSetPolicy:
		return r.servePlugins(ctx)
	case wire.KindJoinGroup:
		return serve(ctx, r, &wire.JoinGroupRequest{}, func(ctx context.Context, m *wire.JoinGroupRequest) (*wire.JoinGroupReply, error) {
			return r.n.groups.serveJoin(ctx, r.allow, m)
		})
	case wire.KindHeartbeat:
		return serve(ctx, r, &wire.HeartbeatRequest{}, func(ctx context.Context, m *wire.HeartbeatRequest) (*wire.HeartbeatReply, error) {
			return r.n.groups.serveHeartbeat(ctx, r.allow, m)
		})
	case wire.KindLeaveGroup:
		return serve(ctx, r, &wire.LeaveGroupRequest{}, func(ctx context.Context, m *wire.LeaveGroupRequest) (*wire.LeaveGroupReply, error) {
			return r.n.groups.serveLeave(ctx, r.allow, m)
		})
	case wire.KindDescribeGroup:
		return serve(ctx, r, &wire.DescribeGroupRequest{}, func(ctx context.Context, m *wire.DescribeGroupRequest) (*wire.DescribeGroupReply, error) {
			return r.n.groups.serveDescribe(ctx, r.allow, m)
		})
	case wire.KindListGroups:
		return serve(ctx, r, &wire.ListGroupsRequest{}, func(ctx context.Context, m *wire.ListGroupsRequest) (*wire.ListGroupsReply, error) {
			return r.n.groups.serveList(ctx, r.allow, m)
		})
	case wire.KindDeleteGroup:
		return serve(ctx, r, &wire.DeleteGroupRequest{}, func(ctx context.Context, m *wire.DeleteGroupRequest) (*wire.DeleteGroupReply, error) {
			return r.n.groups.serveDelete(ctx, r.allow, m)
		})
	case wire.KindGetState, wire.KindCommitWithState:
		return r.serveState(ctx)
	case wire.KindAddUplink:
		return serve(ctx, r, &wire.AddUplinkRequest{}, r.addUplink(r.n.uplinks))
	case wire.KindListUplinks:
		return serve(ctx, r, &wire.ListUplinksRequest{}, r.listUplinks(r.n.uplinks))
	case wire.KindUplinkStatus:
		return serve(ctx, r, &wire.UplinkStatusRequest{}, r.uplinkStatus(r.n.uplinks))
	case wire.KindRemoveUplink:
		return serve(ctx, r, &wire.RemoveUplinkRequest{}, r.removeUplink(r.n.uplinks))
	}
	// CheckRequest accepts only defined kinds; a kind defined in wire but
	// not served here is a node bug, not a client's.
	return wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusUnknownKind, fmt.Sprintf("%s is not served by this node", f.Kind))
}

// request is one request being served.
type request struct {
	n      *Node
	tok    *tokenRecord
	frame  wire.Frame
	raw    []byte            // the whole frame, as read
	shared *quic.SharedFrame // raw, when shared with the engine (shareFrame)
	// deferring lets a handler leave the wait for its durability to the
	// stream's writer (request.durable).
	deferring bool
	wait      func(context.Context) error
	ready     func() bool
	// out is the reply when it is not one frame made at once: the parts
	// of a poll reply, or a deferred wait.
	out served
	// polled are the poll results the reply refers to, released once it
	// is written (releasePolled).
	polled []PollResult
}

// releasePolled gives the memory of the poll results the request's reply
// referred to back to the engine.
func (r *request) releasePolled() {
	for i := range r.polled {
		r.polled[i].Release()
	}
	r.polled = nil
}

// durable has the request's ordered effects made durable. A handler calls
// it once its owners returned from ordering, with wait, which waits for
// durability and may complete the reply in place, and ready, which says
// whether wait would return at once. On a stream, the wait happens after
// the handler returns, in the stream's writer, so the stream's next
// request starts (and its effects land after this one's) while this one
// waits; the reply is encoded once wait returned, or wait's error is
// answered. Without ready (metadata syncs, which a probe must not
// start), wait starts at once in its own goroutine, so that the waits of
// consecutive requests overlap. Elsewhere durable waits and returns wait's
// error.
func (r *request) durable(ctx context.Context, wait func(context.Context) error, ready func() bool) error {
	if !r.deferring {
		return wait(ctx)
	}
	if ready != nil {
		r.wait, r.ready = wait, ready
		return nil
	}
	done := make(chan struct{})
	var err error
	kind := r.frame.Kind
	r.n.work.Go(func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				r.n.log.Error("request handler panicked", "kind", kind, "panic", p, "stack", string(debug.Stack()))
				err = fmt.Errorf("node: the request handler panicked: %v", p)
			}
		}()
		err = wait(ctx)
	})
	r.wait = func(context.Context) error {
		<-done
		return err
	}
	r.ready = func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	return nil
}

// serve decodes the request into req, runs fn, and encodes its reply or
// error. A poll reply is left in r.out as parts that refer to the stored
// batches; a reply whose durability fn deferred, as r.out.finish.
func serve[Req, Rep wire.Message](ctx context.Context, r *request, req Req, fn func(context.Context, Req) (Rep, error)) []byte {
	start := time.Now()
	if err := wire.DecodeRequest(r.frame, req); err != nil {
		return errorReply(r.frame.FrameHeader, err)
	}
	rep, err := fn(ctx, req)
	if wait := r.wait; wait != nil {
		r.wait = nil
		if err == nil {
			r.out = served{ready: r.ready, finish: func() served {
				return encodeReply(r, start, req, rep, wait(ctx))
			}}
			return nil
		}
	}
	out := encodeReply(r, start, req, rep, err)
	if out.parts != nil {
		r.out = out
	}
	return out.frame
}

// encodeReply observes a request that ended with rep or err, and encodes
// its reply.
func encodeReply[Req, Rep wire.Message](r *request, start time.Time, req Req, rep Rep, err error) served {
	observeRequest(r.n.log, r.n.cfg.Metrics, r.frame.Kind, start, req, rep, err)
	if err != nil {
		s, _ := StatusOf(err)
		if s == wire.StatusInternal {
			r.n.log.Error("request failed", "kind", r.frame.Kind, "err", err)
		}
		return served{frame: errorReply(r.frame.FrameHeader, err)}
	}
	if pr, ok := any(rep).(*wire.PollReply); ok && r.deferring {
		// The stored batches are immutable: the stream writes them as
		// they are, after the fields before them.
		buf, parts, err := pr.AppendFrameParts(nil, r.frame.ID)
		if err == nil {
			return served{frame: buf, parts: parts}
		}
		r.n.log.Error("encoding a reply", "kind", r.frame.Kind, "err", err)
		return served{frame: errorReply(r.frame.FrameHeader, err)}
	}
	var buf []byte
	if h, ok := any(rep).(interface{ SizeHint() int }); ok {
		// A poll reply copies its batches: one allocation of the right
		// size instead of growing through every doubling.
		buf = make([]byte, 0, wire.FrameHeaderSize+4+h.SizeHint())
	}
	out, err := wire.AppendReply(buf, r.frame.ID, rep)
	if err != nil {
		r.n.log.Error("encoding a reply", "kind", r.frame.Kind, "err", err)
		return served{frame: errorReply(r.frame.FrameHeader, err)}
	}
	return served{frame: out}
}

// errorReply answers h with the status of err.
func errorReply(h wire.FrameHeader, err error) []byte {
	s, msg := StatusOf(err)
	if s == wire.StatusOK {
		s = wire.StatusInternal
	}
	return wire.AppendErrorReply(nil, h, s, msg)
}

// allow returns ErrForbidden unless the token grants want on topic.
func (r *request) allow(topic string, want wire.Scope) error {
	if r.tok.allows(topic, want) {
		return nil
	}
	if topic == "" {
		return fmt.Errorf("%w: token %s lacks the %s scope", ErrForbidden, r.tok.info.ID, want)
	}
	return fmt.Errorf("%w: token %s lacks the %s scope on topic %q", ErrForbidden, r.tok.info.ID, want, topic)
}
