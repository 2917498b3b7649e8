package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgemq/ledge/node/kafka"
	"github.com/ledgemq/ledge/node/session"
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
	rec, err := n.tokens.Authenticate(m.Token)
	if err != nil {
		n.log.Info("authentication refused", "remote", req.RemoteAddr, "reason", err)
		return refuse(quic.CodeUnauthenticated, err.Error())
	}
	reply, err := wire.AppendReply(nil, f.ID, &wire.AuthenticateReply{
		TokenID: rec.Info.ID, Topic: rec.Info.Topic, Scopes: rec.Info.Scopes,
		MaxFrameSize: uint32(n.cfg.Transport.MaxFrameSize - wire.FrameHeaderSize),
		NodeVersion:  n.cfg.Version,
	})
	if err != nil {
		return refuse(quic.CodeInternal, err.Error())
	}
	return quic.Identity{TokenID: rec.Info.ID, Value: authed{rec, m.Flags}}, reply, nil
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
	id, ok := c.Identity().Value.(authed)
	if !ok {
		_ = c.Close(quic.CodeInternal, "connection without identity")
		return
	}
	rec := id.tok
	if rec.Revoked() { // revoked between authentication and now
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
	sess := session.New((*sessionNode)(n), rec, hostOf(c.RemoteAddr()))
	sess.SetClientFlags(id.flags)
	var streams sync.WaitGroup
	defer streams.Wait()
	for {
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		streams.Go(func() { n.serveStream(ctx, sess, s) })
	}
}

// served is a reply: frame, or parts written back to back (a poll
// reply's stored batches are written as they are).
type served struct {
	frame []byte
	parts [][]byte
}

// large reports whether the reply is in parts of more than smallPollReply
// bytes, which the stream's writer sends while its next request is read.
func (s served) large() bool {
	if s.parts == nil {
		return false
	}
	n := 0
	for _, p := range s.parts {
		n += len(p)
	}
	return n > smallPollReply
}

// smallPollReply is the largest poll reply the reading goroutine writes
// itself, copied into the stream's buffer as a produce reply is.
const smallPollReply = 16 << 10

// serveStream reads the requests of a stream in order and handles each on
// this goroutine: a request that orders effects (produce, commit, reset)
// returns once they are ordered, leaving the wait for their durability to
// writeReplies, so the next request starts while it waits — a produce
// stream keeps its partition order while many appends share one fsync.
// Replies leave in request order: from writeReplies, or from this
// goroutine when nothing is owed (replyNow).
func (n *Node) serveStream(ctx context.Context, sess *session.Session, s *quic.Stream) {
	w := &replyWriter{depth: n.cfg.MaxStreamRequests}
	for {
		req, err := s.ReadFrame()
		if err != nil {
			n.streamEnded(s, err)
			break
		}
		r := n.handle(ctx, sess, req.Frame)
		r.read = req
		if !n.replyNow(ctx, s, w, r) {
			w.queue <- r
		}
	}
	if w.queue != nil {
		close(w.queue)
	}
	w.writers.Wait()
	_ = s.Close()
}

// replyWriter is a stream's writer side: the queue of replies for
// writeReplies, and how many of them it has not finished. Its goroutine
// runs only while replies are owed: it starts with the first one and
// ends once it has settled them all, so an idle stream (a device between
// two records, or its poll parked) has none. At 5,000 idle devices, two
// streams each, the writers were 10,000 of the node's 35,000 goroutines.
type replyWriter struct {
	queue chan *request // made for the first reply owed (2 KiB at 256 requests a stream)
	depth int
	// mu guards owed: replies queued and not yet written and flushed by
	// writeReplies. The reading goroutine writes a reply itself only when
	// nothing is owed, so replies keep the request order.
	mu      sync.Mutex
	owed    int
	broken  bool // a write or flush failed: later replies are dropped
	running bool // a writeReplies goroutine runs; it stops only with nothing owed
	writers sync.WaitGroup
}

// oweLocked counts one more reply for the writer and starts its
// goroutine if none runs. w.mu is held.
func (n *Node) oweLocked(ctx context.Context, s *quic.Stream, w *replyWriter) {
	w.owed++
	if w.queue == nil {
		w.queue = make(chan *request, w.depth)
	}
	if !w.running {
		w.running = true
		w.writers.Go(func() { n.writeReplies(ctx, s, w) })
	}
}

// replyNow writes r's reply from the reading goroutine when it is one
// frame, ready, and no earlier reply is still with the writer, and
// reports whether it did; otherwise it counts r as owed by the writer, to
// which the caller hands it. A one-at-a-time client then gets its reply
// without a hand-off to the writer goroutine and back. A request that
// must wait for its durability, replies behind one, and large poll
// replies (written in parts) still go through the writer, so the
// stream's next request is read meanwhile. A small poll reply (a device's
// command) is written at once, like a produce's: handing it to a writer
// goroutine cost a goroutine start and a context switch per poll.
func (n *Node) replyNow(ctx context.Context, s *quic.Stream, w *replyWriter, r *request) bool {
	if r.out.large() || (r.Deferred() && !r.DurableNow()) {
		w.mu.Lock()
		n.oweLocked(ctx, s, w)
		w.mu.Unlock()
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owed > 0 {
		n.oweLocked(ctx, s, w)
		return false
	}
	if r.Deferred() {
		r.out = n.finish(ctx, r)
	}
	if !w.broken {
		err := writeServed(s, r.out)
		if err == nil {
			err = s.Flush()
		}
		w.broken = err != nil
	}
	r.done()
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
// broken stream): its bytes go back to the in-flight budget, its frame,
// when shared with the engine, loses the stream's share (a poll's, which
// nothing keeps, is recycled), the stored batches a poll reply referred
// to go back to the engine, and the request itself goes back to the pool
// (see request). Nothing may use r after.
func (r *request) done() {
	defer r.recycle()
	r.read.Release()
	r.releaseAdmission()
	r.dropShare()
	r.ReleasePolled()
	if r.frame.Kind == wire.KindPoll {
		quic.RecycleFrame(r.raw) // decoding copied what the poll keeps
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
// may reply directly again; with nothing owed any more, it returns.
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
	// reply owed so far is written and flushed, and reports whether the
	// writer is done: nothing more is owed (the reading goroutine starts
	// another writer for the next reply it owes).
	settle := func() (idle bool) {
		flush()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.owed -= written
		w.broken = w.broken || broken
		broken = w.broken
		written = 0
		if w.owed == 0 {
			w.running = false
			return true
		}
		return false
	}
	write := func(r *request) {
		written++
		if r.Deferred() {
			if !r.DurableNow() {
				flush() // do not hold earlier replies while this one waits
			}
			r.out = n.finish(ctx, r)
		}
		if !broken {
			broken = writeServed(s, r.out) != nil
			dirty = true
		}
		r.done()
	}
	for {
		r, ok := <-queue
		if !ok {
			settle()
			return
		}
		w.mu.Lock()
		broken = w.broken
		w.mu.Unlock()
		write(r)
	more:
		for {
			select {
			case nr, ok := <-queue:
				if !ok {
					break more
				}
				write(nr)
			default:
				break more
			}
		}
		if settle() {
			return
		}
	}
}

// finish waits for the effects of r's deferred reply to be durable and
// encodes the reply, answering with StatusInternal should it panic.
func (n *Node) finish(ctx context.Context, r *request) (out served) {
	defer func() {
		if p := recover(); p != nil {
			n.log.Error("request handler panicked", "kind", r.frame.Kind, "panic", p, "stack", string(debug.Stack()))
			out = served{frame: wire.AppendErrorReply(nil, r.frame.FrameHeader, wire.StatusInternal, "the node failed to handle the request")}
		}
	}()
	return encodeReply(r, r.start, r.msg, r.rep, r.WaitDurable(ctx))
}

// handle serves one request frame. It returns the request with its reply
// in out, or deferred (finish encodes it). It never panics: a panic in a
// handler is logged and answered with StatusInternal.
func (n *Node) handle(ctx context.Context, sess *session.Session, frame []byte) (r *request) {
	r = newRequest(n, frame)
	f, err := parseFrame(frame)
	r.Init(sess, f.Kind)
	r.Defer()
	r.SetShare(r)
	r.frame = f
	if err != nil {
		r.out.frame = errorReply(f.FrameHeader, err)
		return r
	}
	defer func() {
		if p := recover(); p != nil {
			n.log.Error("request handler panicked", "kind", f.Kind, "panic", p, "stack", string(debug.Stack()))
			r.out = served{frame: wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusInternal, "the node failed to handle the request")}
			r.Undefer()
		}
	}()
	if err := wire.CheckRequest(f.FrameHeader); err != nil {
		r.out.frame = errorReply(f.FrameHeader, err)
		return r
	}
	if err := sess.Token().Valid(n.cfg.Now()); err != nil {
		r.out.frame = errorReply(f.FrameHeader, err)
		return r
	}
	if f.Kind == wire.KindProduce && !n.admit(sess, r) {
		return r
	}
	b := n.dispatch(ctx, r)
	if !r.Deferred() && r.out.parts == nil {
		r.ReleasePolled() // the reply, if any, holds copies
		r.out.frame = b
	}
	return r
}

// dispatch runs the handler of r's kind and returns its reply frame (nil
// when the handler left its reply in r.out).
func (n *Node) dispatch(ctx context.Context, r *request) []byte {
	f := r.frame
	switch f.Kind {
	case wire.KindAuthenticate:
		return errorReply(f.FrameHeader, invalidArgument("the connection is already authenticated"))
	case wire.KindCreateTopic:
		return serve(ctx, r, &wire.CreateTopicRequest{}, r.CreateTopic)
	case wire.KindDeleteTopic:
		return serve(ctx, r, &wire.DeleteTopicRequest{}, r.DeleteTopic)
	case wire.KindListTopics:
		return serve(ctx, r, &wire.ListTopicsRequest{}, r.ListTopics)
	case wire.KindDescribeTopic:
		return serve(ctx, r, &wire.DescribeTopicRequest{}, r.DescribeTopic)
	case wire.KindPurge:
		return serve(ctx, r, &wire.PurgeRequest{}, r.Purge)
	case wire.KindGetPartitionState:
		return serve(ctx, r, &wire.GetPartitionStateRequest{}, r.PartitionState)
	case wire.KindInitProducer:
		return serve(ctx, r, &wire.InitProducerRequest{}, r.InitProducer)
	case wire.KindProduce:
		return serve(ctx, r, &r.produce, r.Produce)
	case wire.KindAttachConsumer:
		return serve(ctx, r, &wire.AttachConsumerRequest{}, r.AttachConsumer)
	case wire.KindPoll:
		return serve(ctx, r, &r.poll, r.Poll)
	case wire.KindCommit:
		return serve(ctx, r, &wire.CommitRequest{}, r.Commit)
	case wire.KindResetPosition:
		return serve(ctx, r, &wire.ResetPositionRequest{}, r.ResetPosition)
	case wire.KindGetCommitted:
		return serve(ctx, r, &wire.GetCommittedRequest{}, r.GetCommitted)
	case wire.KindCreateToken:
		return serve(ctx, r, &wire.CreateTokenRequest{}, r.CreateToken)
	case wire.KindListTokens:
		return serve(ctx, r, &wire.ListTokensRequest{}, r.ListTokens)
	case wire.KindRevokeToken:
		return serve(ctx, r, &wire.RevokeTokenRequest{}, r.RevokeToken)
	case wire.KindAddPlugin:
		return serve(ctx, r, &wire.AddPluginRequest{}, r.AddPlugin)
	case wire.KindListPlugins:
		return serve(ctx, r, &wire.ListPluginsRequest{}, r.ListPlugins)
	case wire.KindRemovePlugin:
		return serve(ctx, r, &wire.RemovePluginRequest{}, r.RemovePlugin)
	case wire.KindSetPolicy:
		return serve(ctx, r, &wire.SetPolicyRequest{}, r.SetPolicy)
	case wire.KindResetPlugin:
		return serve(ctx, r, &wire.ResetPluginRequest{}, r.ResetPlugin)
	case wire.KindJoinGroup:
		return serve(ctx, r, &wire.JoinGroupRequest{}, r.JoinGroup)
	case wire.KindHeartbeat:
		return serve(ctx, r, &wire.HeartbeatRequest{}, r.Heartbeat)
	case wire.KindLeaveGroup:
		return serve(ctx, r, &wire.LeaveGroupRequest{}, r.LeaveGroup)
	case wire.KindDescribeGroup:
		return serve(ctx, r, &wire.DescribeGroupRequest{}, r.DescribeGroup)
	case wire.KindListGroups:
		return serve(ctx, r, &wire.ListGroupsRequest{}, r.ListGroups)
	case wire.KindDeleteGroup:
		return serve(ctx, r, &wire.DeleteGroupRequest{}, r.DeleteGroup)
	case wire.KindGetState:
		return serve(ctx, r, &wire.GetStateRequest{}, r.GetState)
	case wire.KindCommitWithState:
		return serve(ctx, r, &wire.CommitWithStateRequest{}, r.CommitWithState)
	case wire.KindAddUplink:
		return serve(ctx, r, &wire.AddUplinkRequest{}, r.AddUplink)
	case wire.KindListUplinks:
		return serve(ctx, r, &wire.ListUplinksRequest{}, r.ListUplinks)
	case wire.KindUplinkStatus:
		return serve(ctx, r, &wire.UplinkStatusRequest{}, r.UplinkStatus)
	case wire.KindRemoveUplink:
		return serve(ctx, r, &wire.RemoveUplinkRequest{}, r.RemoveUplink)
	case wire.KindAddTransform:
		return serve(ctx, r, &wire.AddTransformRequest{}, r.AddTransform)
	case wire.KindListTransforms:
		return serve(ctx, r, &wire.ListTransformsRequest{}, r.ListTransforms)
	case wire.KindTransformStatus:
		return serve(ctx, r, &wire.TransformStatusRequest{}, r.TransformStatus)
	case wire.KindPauseTransform:
		return serve(ctx, r, &wire.PauseTransformRequest{}, r.PauseTransform)
	case wire.KindResumeTransform:
		return serve(ctx, r, &wire.ResumeTransformRequest{}, r.ResumeTransform)
	case wire.KindRemoveTransform:
		return serve(ctx, r, &wire.RemoveTransformRequest{}, r.RemoveTransform)
	case wire.KindAddDownlink:
		return serve(ctx, r, &wire.AddDownlinkRequest{}, r.AddDownlink)
	case wire.KindListDownlinks:
		return serve(ctx, r, &wire.ListDownlinksRequest{}, r.ListDownlinks)
	case wire.KindDownlinkStatus:
		return serve(ctx, r, &wire.DownlinkStatusRequest{}, r.DownlinkStatus)
	case wire.KindRemoveDownlink:
		return serve(ctx, r, &wire.RemoveDownlinkRequest{}, r.RemoveDownlink)
	}
	// CheckRequest accepts only defined kinds; a kind defined in wire but
	// not served here is a node bug, not a client's.
	return wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusUnknownKind, fmt.Sprintf("%s is not served by this node", f.Kind))
}

// request is a call that came as a QUIC frame, from its frame to its
// reply. Its memory is reused, so that serving a small request allocates
// next to nothing: handle takes it from the pool (newRequest), and done,
// once its reply is written, puts it back (recycle). In between it has
// one owner at a time:
//
//   - the stream's reading goroutine, from handle until it writes the
//     reply itself (replyNow) or hands the request to the writer;
//   - the stream's writer (writeReplies), from the queue until done;
//   - a deferred reply's wait (session.Call's durable), which writes the
//     call's result until it ends; finish waits for it before encoding,
//     so it has ended before done.
//
// What outlives done is not the request's: the engine's share of the
// frame lives in a frameShare of its own (ShareFrame), and the stored
// batches of a poll reply are released by done. Nothing may keep a
// pointer into the request (its decoded messages, its reply buffer) past
// done.
type request struct {
	session.Call
	n     *Node
	frame wire.Frame
	raw   []byte        // the whole frame, as read
	read  *quic.Request // raw's budget on the stream, released by done
	// share is raw's shares when the handler shared it with the engine
	// (ShareFrame, sharing set): the stream drops its share once the
	// reply is written. A share the engine let go of first is kept for
	// the request's next life.
	share   *frameShare
	sharing bool
	// out is the reply, unless deferred.
	out served

	// What a pooled request keeps from one life to the next: the
	// messages the hot requests decode into (decoding the same names
	// again allocates nothing), the reply's buffer and its parts.
	produce wire.ProduceRequest
	poll    wire.PollRequest
	buf     []byte
	parts   [][]byte

	admitted bool // it holds a place of the node's shedder (admit)

	// A deferred reply waits for the effects its request ordered to be
	// durable; finish then encodes rep, the handler's reply to msg (or
	// the error of the wait), as serve would have at start.
	start    time.Time
	msg, rep wire.Message
}

// serve decodes the request into req, runs fn, and encodes its reply or
// error. A poll reply is left in r.out as parts that refer to the stored
// batches; a reply whose durability fn deferred is left to finish.
func serve[Req, Rep wire.Message](ctx context.Context, r *request, req Req, fn func(context.Context, Req) (Rep, error)) []byte {
	start := time.Now()
	if err := wire.DecodeRequest(r.frame, req); err != nil {
		return errorReply(r.frame.FrameHeader, err)
	}
	rep, err := fn(ctx, req)
	if r.Deferred() {
		if err == nil {
			r.start, r.msg, r.rep = start, req, rep
			return nil
		}
		r.Undefer()
	}
	out := encodeReply(r, start, req, rep, err)
	if out.parts != nil {
		r.out = out
	}
	return out.frame
}

// encodeReply observes a request that ended with rep or err, and encodes
// its reply.
func encodeReply(r *request, start time.Time, req, rep wire.Message, err error) served {
	observeRequest(r.n.log, r.n.cfg.Metrics, r.frame.Kind, start, req, rep, err)
	if err != nil {
		s, _ := StatusOf(err)
		if s == wire.StatusInternal {
			r.n.log.Error("request failed", "kind", r.frame.Kind, "err", err)
		}
		return served{frame: errorReply(r.frame.FrameHeader, err)}
	}
	if pr, ok := rep.(*wire.PollReply); ok {
		// The stored batches are immutable: the stream writes them as
		// they are, after the fields before them.
		buf, parts, err := pr.AppendFrameParts(slices.Grow(r.buf[:0], wire.FrameHeaderSize+4+pollReplyFieldBytes*len(pr.Partitions)), r.parts[:0], r.frame.ID)
		if err == nil {
			r.buf, r.parts = buf[:0], parts
			return served{frame: buf, parts: parts}
		}
		r.n.log.Error("encoding a reply", "kind", r.frame.Kind, "err", err)
		return served{frame: errorReply(r.frame.FrameHeader, err)}
	}
	// One allocation of about the right size instead of growing through
	// every doubling: a poll reply copies its batches, and most other
	// replies (a produce's, say) are a few fields.
	size := smallReplyBytes
	if h, ok := rep.(interface{ SizeHint() int }); ok {
		size = wire.FrameHeaderSize + 4 + h.SizeHint()
	}
	out, err := wire.AppendReply(slices.Grow(r.buf[:0], size), r.frame.ID, rep)
	if err != nil {
		r.n.log.Error("encoding a reply", "kind", r.frame.Kind, "err", err)
		return served{frame: errorReply(r.frame.FrameHeader, err)}
	}
	r.buf = out[:0]
	return served{frame: out}
}

// smallReplyBytes is the buffer a reply without a size hint is encoded
// into first: a produce reply takes 41 bytes. pollReplyFieldBytes is what
// a poll reply's partition takes before its batches (status, state,
// token: 94 bytes with an empty message).
const (
	smallReplyBytes     = 48
	pollReplyFieldBytes = 128
)

// errorReply answers h with the status of err.
func errorReply(h wire.FrameHeader, err error) []byte {
	s, msg := StatusOf(err)
	if s == wire.StatusOK {
		s = wire.StatusInternal
	}
	return wire.AppendErrorReply(nil, h, s, msg)
}

// hostOf is the IP address of a connection's remote address, without the
// port ("" when there is none).
func hostOf(a net.Addr) string {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.IP.String()
	case *net.TCPAddr:
		return a.IP.String()
	case nil:
		return ""
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return ""
}

// ShareFrame shares the request's frame, which holds the batch, with the
// storage engine: the frame is read into again once both the engine and
// the stream, after writing the reply, let go of it. It returns the
// engine's release.
func (r *request) ShareFrame() func() {
	if r.raw == nil || r.sharing || cap(r.raw) < minRecycledFrame {
		return nil
	}
	if r.share == nil {
		r.share = newFrameShare()
	}
	r.sharing = true
	r.share.frame = r.raw
	r.share.shares.Store(2)
	return r.share.release
}

// minRecycledFrame is the smallest produce frame shared with the engine;
// a smaller one's batch is left to the garbage collector with its frame.
// A warm tail cache keeps a batch for good, and then a frameShare costs
// two allocations where a small frame costs one.
const minRecycledFrame = 256

// dropShare gives up the stream's share of the frame, if the engine was
// given one. When the engine let go first, the frame is recycled here and
// the request keeps its frameShare for its next life; otherwise the
// engine's release recycles the frame later, and the request forgets the
// frameShare, which is then the engine's alone.
func (r *request) dropShare() {
	if !r.sharing {
		return
	}
	r.sharing = false
	if !r.share.drop() {
		r.share = nil
	}
}

// frameShare is a request frame shared with the storage engine: the
// stream's share and the engine's. The last to drop its share recycles
// the frame (quic.RecycleFrame). release, the engine's drop, is made
// once, so sharing the frame of a reused request allocates nothing.
type frameShare struct {
	frame   []byte
	shares  atomic.Int32
	release func()
}

func newFrameShare() *frameShare {
	f := &frameShare{}
	f.release = func() { f.drop() }
	return f
}

// drop gives up one share and reports whether it was the last: the frame
// is recycled, and nothing holds f any more but its owner.
func (f *frameShare) drop() bool {
	switch n := f.shares.Add(-1); {
	case n > 0:
		return false
	case n < 0:
		panic("node: a request frame dropped more times than it was shared")
	}
	frame := f.frame
	f.frame = nil
	quic.RecycleFrame(frame)
	return true
}

// requests are the node's request structs between two lives (request).
var requests = sync.Pool{New: func() any { return new(request) }}

// newRequest is a request of node n read as frame, from the pool: its
// fields zero but for the memory it keeps from its last life (decoded
// messages, reply buffers, its frameShare, the call's scratch).
func newRequest(n *Node, frame []byte) *request {
	r := requests.Get().(*request)
	*r = request{
		Call: r.Call, n: n, raw: frame, share: r.share,
		produce: r.produce, poll: r.poll, buf: r.buf[:0], parts: r.parts[:0],
	}
	return r
}

// recycle puts r back in the pool once its reply is written: its owners
// are done with it (see request). A deferred reply's wait always ended
// by then (finish waits for it), except when the handler panicked after
// starting it: such a request is left to the garbage collector.
func (r *request) recycle() {
	if !r.WaitEnded() {
		return
	}
	if cap(r.buf) > maxKeptReplyBytes {
		r.buf = nil
	}
	clear(r.parts[:cap(r.parts)])
	r.out, r.msg, r.rep, r.read = served{}, nil, nil, nil
	r.raw, r.frame = nil, wire.Frame{}
	r.produce.Batch = nil
	requests.Put(r)
}

const maxKeptReplyBytes = 16 << 10 // the largest reply buffer a pooled request keeps

// kafkaAdmission lends the QUIC listener's admission to the Kafka
// listener, so that the connections of both count against one cap of
// unauthenticated connections (quic.max_unauthenticated) and one of
// authenticated ones (quic.max_conns, sized from memory), and one per
// token. It lives with the QUIC listener's code, apart from
// kafka_adapter.go, which touches no QUIC type.
type kafkaAdmission struct{ a *quic.Admission }

func (k kafkaAdmission) Admit(remote net.Addr) (kafka.Place, error) {
	p, err := k.a.Admit(remote)
	if err != nil {
		return nil, kafkaAdmissionError(err)
	}
	return kafkaPlace{p}, nil
}

type kafkaPlace struct{ p *quic.Place }

func (k kafkaPlace) Authenticated(tokenID string) error {
	return kafkaAdmissionError(k.p.Authenticated(tokenID))
}

func (k kafkaPlace) OnEvicted(f func()) func() bool { return k.p.OnEvicted(f) }

func (k kafkaPlace) Release() { k.p.Release() }

// kafkaAdmissionError is the Kafka listener's error for the QUIC
// admission's.
func kafkaAdmissionError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, quic.ErrConnLimit):
		return kafka.ErrConnLimit
	case errors.Is(err, quic.ErrTokenLimit):
		return kafka.ErrTokenLimit
	case errors.Is(err, quic.ErrEvicted):
		return kafka.ErrEvicted
	}
	return kafka.ErrShutdown
}

// sharedAdmission is the admission the node's Kafka listener shares.
func (n *Node) sharedAdmission() kafka.Admission { return kafkaAdmission{n.ln.Admission()} }
