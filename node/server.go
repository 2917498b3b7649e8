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
// requests answered in order. Each request runs in its own goroutine, and
// the next one starts as soon as the current one is ordered — for produce,
// commit and reset, once the owner ordered its effects (Owner.OrderProduce,
// OrderCommit, OrderReset) and while it waits for their durability; for
// everything else, when it is done — so a produce stream keeps its
// partition order while many appends share one fsync. A writer goroutine
// sends the replies in request order, coalescing the flushes of replies
// that are ready together; a reply is ready only once its effects are
// durable.

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

// inflight is a request read from a stream, and its reply once done.
type inflight struct {
	req   *quic.Request
	reply []byte
	done  chan struct{}
}

// serveStream reads the requests of a stream in order, starts each one
// once the previous one is ordered, and has writeReplies answer them in
// order.
func (n *Node) serveStream(ctx context.Context, tok *tokenRecord, s *quic.Stream) {
	queue := make(chan *inflight, n.cfg.MaxStreamRequests)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		n.writeReplies(s, queue)
	}()
	for {
		req, err := s.ReadFrame()
		if err != nil {
			n.streamEnded(s, err)
			break
		}
		f := &inflight{req: req, done: make(chan struct{})}
		queue <- f
		ordered := n.start(ctx, tok, f)
		select {
		case <-ordered:
		case <-f.done:
		}
	}
	close(queue)
	<-writerDone
	_ = s.Close()
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

// start runs a request in its own goroutine and returns a channel closed
// once the next request of the stream may start: when the request is
// ordered (request.markOrdered) or done, whichever comes first.
func (n *Node) start(ctx context.Context, tok *tokenRecord, f *inflight) <-chan struct{} {
	var ordered func()
	next := (<-chan struct{})(f.done)
	if h, _, err := wire.ParseFrameHeader(f.req.Frame, len(f.req.Frame)); err == nil && ordersEffects(h.Kind) {
		ch := make(chan struct{})
		var once sync.Once
		ordered = func() { once.Do(func() { close(ch) }) }
		next = ch
	}
	n.work.Go(func() {
		defer close(f.done)
		f.reply = n.handle(ctx, tok, f.req.Frame, ordered)
	})
	return next
}

// ordersEffects reports whether requests of kind k say when they are
// ordered, before they are done.
func ordersEffects(k wire.Kind) bool {
	return k == wire.KindProduce || k == wire.KindCommit || k == wire.KindResetPosition
}

// writeReplies writes each request's reply in request order and releases
// its bytes from the in-flight budget. It flushes when no further reply is
// ready, so replies that complete together leave in one flush.
func (n *Node) writeReplies(s *quic.Stream, queue <-chan *inflight) {
	broken := false
	write := func(f *inflight) {
		if !broken {
			if err := s.WriteFrame(f.reply); err != nil {
				broken = true
			}
		}
		f.req.Release()
	}
	flush := func() {
		if !broken && s.Flush() != nil {
			broken = true
		}
	}
	var next *inflight
	for {
		f := next
		next = nil
		if f == nil {
			var ok bool
			if f, ok = <-queue; !ok {
				return
			}
		}
		<-f.done
		write(f)
		select {
		case nf, ok := <-queue:
			if !ok {
				flush()
				return
			}
			next = nf
			select {
			case <-nf.done:
				continue // ready too: write it before flushing
			default:
			}
		default:
		}
		flush()
	}
}

// handle answers one request frame with one reply frame. It never panics:
// a panic in a handler is logged and answered with StatusInternal.
// ordered, when set, is called once the request's effects are ordered.
func (n *Node) handle(ctx context.Context, tok *tokenRecord, frame []byte, ordered func()) (reply []byte) {
	f, err := parseFrame(frame)
	if err != nil {
		return errorReply(f.FrameHeader, err)
	}
	defer func() {
		if p := recover(); p != nil {
			n.log.Error("request handler panicked", "kind", f.Kind, "panic", p, "stack", string(debug.Stack()))
			reply = wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusInternal, "the node failed to handle the request")
		}
	}()
	if err := wire.CheckRequest(f.FrameHeader); err != nil {
		return errorReply(f.FrameHeader, err)
	}
	if err := tok.valid(n.cfg.Now()); err != nil {
		return errorReply(f.FrameHeader, err)
	}
	r := &request{n: n, tok: tok, frame: f, ordered: ordered}
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
	n     *Node
	tok   *tokenRecord
	frame wire.Frame
	// ordered, when set, lets the stream's next request start.
	ordered func()
}

// markOrdered says the request's effects are ordered: the stream's next
// request may start, and its effects land after this one's. A handler
// calls it once its owners returned from ordering (successfully or not),
// before it waits for durability.
func (r *request) markOrdered() {
	if r.ordered != nil {
		r.ordered()
	}
}

// serve decodes the request into req, runs fn, and encodes its reply or
// error.
func serve[Req, Rep wire.Message](ctx context.Context, r *request, req Req, fn func(context.Context, Req) (Rep, error)) []byte {
	start := time.Now()
	if err := wire.DecodeRequest(r.frame, req); err != nil {
		return errorReply(r.frame.FrameHeader, err)
	}
	rep, err := fn(ctx, req)
	observeRequest(r.n.log, r.n.cfg.Metrics, r.frame.Kind, start, req, rep, err)
	if err != nil {
		s, _ := StatusOf(err)
		if s == wire.StatusInternal {
			r.n.log.Error("request failed", "kind", r.frame.Kind, "err", err)
		}
		return errorReply(r.frame.FrameHeader, err)
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
		return errorReply(r.frame.FrameHeader, err)
	}
	return out
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
