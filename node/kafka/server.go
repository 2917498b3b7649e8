package kafka

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ledgemq/ledge/transport/wire"
)

// Defaults of Config's bounds.
const (
	// DefaultMaxRequestBytes bounds an authenticated connection's
	// request, as Kafka's socket.request.max.bytes does.
	DefaultMaxRequestBytes = 100 << 20
	// DefaultMaxControlRequestBytes bounds an authenticated connection's
	// requests but its Produce, Fetch and OffsetCommit ones: a Metadata,
	// an OffsetFetch or a group request (room for more elements than
	// MaxRequestElements). kmsg
	// sizes their arrays from claimed counts checked against a few bytes
	// an element, so what decoding one allocates is a bounded multiple of
	// this, not of MaxRequestBytes.
	DefaultMaxControlRequestBytes = 16 << 10
	// DefaultMaxRequestElements bounds the topics, partitions and groups
	// of one request, in all: answering each costs the node up to about
	// 1.5 KiB (a Fetch partition 1.43 KB, a DescribeGroups group 1.2 KB,
	// a Metadata topic or a committed partition under 0.9 KB), so 512
	// keep what a request makes the node allocate under 1 MiB, with room
	// for a Fetch's partitions past them, which are decoded and left
	// unanswered.
	DefaultMaxRequestElements = 512
	// DefaultMaxUnauthenticatedRequestBytes bounds a request before
	// authentication (ApiVersions, SaslHandshake, SaslAuthenticate): a
	// thirty-second of Kafka's 512 KiB (sasl.server.max.receive.size),
	// room enough for a client's name and version and a PLAIN exchange
	// carrying a Ledge token, a few hundred bytes.
	DefaultMaxUnauthenticatedRequestBytes = 16 << 10
	// DefaultAuthTimeout bounds the time from accepting a connection to
	// its successful SASL exchange.
	DefaultAuthTimeout = 10 * time.Second
	// DefaultIdleTimeout closes an authenticated connection that sends no
	// request for this long, as Kafka's connections.max.idle.ms (10
	// minutes); a client that reads no reply for this long is closed too.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultReadTimeout is the longest a request that has begun may go
	// without a byte of it arriving.
	DefaultReadTimeout = 30 * time.Second
	// DefaultMaxConns bounds authenticated connections (the QUIC
	// listener's fallback; a node sizes it from its memory).
	DefaultMaxConns = 4096
	// DefaultMaxUnauthenticated bounds the connections that have not
	// authenticated yet; one more evicts the oldest.
	DefaultMaxUnauthenticated = 256
)

// Config configures a Server.
type Config struct {
	// Listen is the TCP address, e.g. 127.0.0.1:9092; port 0 picks one.
	Listen string
	// TLS, when set, makes the listener speak TLS (SASL_SSL); nil is
	// plain TCP (SASL_PLAINTEXT).
	TLS *tls.Config
	// Backend serves the requests.
	Backend Backend
	// Logger receives one line per connection problem. Default: discard.
	Logger *slog.Logger
	// ClusterID is what Metadata says the cluster is called. Default
	// "ledge".
	ClusterID string
	// MaxRequestBytes bounds a request of an authenticated connection;
	// a larger one closes the connection. Default
	// DefaultMaxRequestBytes. Whatever a request announces, the listener
	// allocates as its bytes arrive (readChunk at a time), not up front.
	MaxRequestBytes int
	// MaxControlRequestBytes bounds an authenticated connection's
	// request other than a Produce, a Fetch or an OffsetCommit (whose claims are checked
	// against their bytes before they are decoded); a larger one closes
	// the connection. Default DefaultMaxControlRequestBytes.
	MaxControlRequestBytes int
	// MaxRequestElements bounds the elements of a request: its topics,
	// partitions, groups and other array entries, at every depth. A
	// Fetch with more is answered for that many partitions, the others
	// left out of the response (the client fetches them again); an
	// OffsetCommit with more commits that many, the others answered
	// REQUEST_TIMED_OUT (the client commits them again); any other
	// request with more closes the connection. Either is logged,
	// once a connection. Default DefaultMaxRequestElements.
	MaxRequestElements int
	// MaxUnauthenticatedRequestBytes bounds a request before
	// authentication; a larger one closes the connection. Default
	// DefaultMaxUnauthenticatedRequestBytes.
	MaxUnauthenticatedRequestBytes int
	// AuthTimeout closes a connection that has not authenticated this
	// long after it was accepted. Default DefaultAuthTimeout.
	AuthTimeout time.Duration
	// IdleTimeout closes an authenticated connection that sends no
	// request, or reads no reply, for this long. Default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// ReadTimeout closes a connection whose request, once begun, goes
	// this long without a byte arriving. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// MaxConns bounds the authenticated connections: while MaxConns are
	// open a new connection is closed as soon as it is accepted, and one
	// that authenticates past it is closed. Default DefaultMaxConns.
	// Unused when Admission is set.
	MaxConns int
	// MaxUnauthenticated bounds the connections that have not
	// authenticated yet. One more arriving evicts (closes) the oldest of
	// them, as the QUIC listener does: abandoned connections push out
	// abandoned connections, never an authenticated one. Default
	// DefaultMaxUnauthenticated. Unused when Admission is set.
	MaxUnauthenticated int
	// Admission, when set, decides which connections are taken and kept
	// in place of MaxConns and MaxUnauthenticated: a node shares its
	// QUIC listener's, so that both listeners' connections count against
	// the same caps.
	Admission Admission
	// Metrics receives one call per request answered. Default: none.
	Metrics Metrics
}

// Server is a Kafka listener in front of a node.
type Server struct {
	cfg    Config
	log    *slog.Logger
	ln     net.Listener
	groups *classicGroups

	adm Admission

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	conns  map[net.Conn]*conn
	work   sync.WaitGroup
}

// nodeID is the one broker Metadata describes: this node.
const nodeID = 1

// Listen starts the listener; Close stops it.
func Listen(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("kafka: a listener needs a backend")
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("kafka: listen: %w", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	return serveListener(cfg, ln), nil
}

// serveListener serves the connections ln accepts.
func serveListener(cfg Config, ln net.Listener) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "ledge"
	}
	setDefault(&cfg.MaxRequestBytes, DefaultMaxRequestBytes)
	setDefault(&cfg.MaxControlRequestBytes, DefaultMaxControlRequestBytes)
	setDefault(&cfg.MaxRequestElements, DefaultMaxRequestElements)
	setDefault(&cfg.MaxUnauthenticatedRequestBytes, DefaultMaxUnauthenticatedRequestBytes)
	setDefault(&cfg.AuthTimeout, DefaultAuthTimeout)
	setDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	setDefault(&cfg.ReadTimeout, DefaultReadTimeout)
	setDefault(&cfg.MaxConns, DefaultMaxConns)
	setDefault(&cfg.MaxUnauthenticated, DefaultMaxUnauthenticated)
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ln: ln, conns: map[net.Conn]*conn{}, groups: newClassicGroups(), adm: cfg.Admission}
	if s.adm == nil {
		s.adm = &localAdmission{maxConns: cfg.MaxConns, maxUnauth: cfg.MaxUnauthenticated}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.work.Go(s.accept)
	return s
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Addr is the address the listener is bound to.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting, ends every connection (parked fetches included)
// and waits for their handlers to return.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.cancel()
	s.mu.Lock()
	for _, cc := range s.conns {
		cc.closeLocked(reasonShutdown)
	}
	s.mu.Unlock()
	s.work.Wait()
	return err
}

func (s *Server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		cc, reason := s.admit(c)
		if cc == nil {
			if reason == "" { // closing
				return
			}
			s.cfg.Metrics.ConnectionRefused(reason)
			s.log.Info("kafka: connection refused", "remote", c.RemoteAddr(), "reason", reason)
			continue
		}
		s.work.Go(func() {
			defer s.release(cc)
			s.serve(cc)
		})
	}
}

// TopicDeleted forgets what the listener keeps about the topic: the
// "no position" its groups committed on its partitions. The node calls it
// whichever protocol deleted the topic, so that a topic created again
// under the name starts without them.
func (s *Server) TopicDeleted(topic string) {
	s.groups.forgetUnset(func(k unsetKey) bool { return k.topic == topic })
}

// GroupDeleted forgets the "no position" the group committed, as
// TopicDeleted does for a topic.
func (s *Server) GroupDeleted(group string) {
	s.groups.forgetUnset(func(k unsetKey) bool { return k.group == group })
}

// CloseSessions closes every connection whose session match accepts
// (the node closes those of a revoked token), parked fetches included,
// and returns how many it closed.
func (s *Server) CloseSessions(match func(Session) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, cc := range s.conns {
		if cc.sess != nil && match(cc.sess) {
			cc.closeLocked(reasonRevoked)
			n++
		}
	}
	return n
}

// conn is one client connection. Its requests are served one at a time,
// in order, as a Kafka broker serves them.
type conn struct {
	s *Server
	c net.Conn
	// sess is nil until SASL succeeded; set under s.mu (CloseSessions
	// reads it), read freely by the connection's own goroutine.
	sess Session
	// place is the connection's place in the admission; stopEviction
	// stops the watch on its eviction.
	place        Place
	stopEviction func() bool
	// authDeadline is when the connection must have authenticated.
	authDeadline time.Time
	// reason is why the connection was closed, the first reason given;
	// under s.mu.
	reason string
	mech   string // the mechanism SaslHandshake chose
	// rawSASL: a SaslHandshake v0 was answered, so the next frame is the
	// SASL exchange itself.
	rawSASL bool
	// clientID is the client id of the connection's latest request
	// header, cut to a name's length; joins carry it.
	clientID string
	// conv converts the connection's produced batches.
	conv converter
	// partial: a request was answered in part (more elements than
	// MaxRequestElements) and logged; the next are not.
	partial bool
}

// refusedOnce logs, once per connection, that a request of api named n
// elements and was answered for limit of them.
func (cc *conn) refusedOnce(api string, n, limit int) {
	if cc.partial {
		return
	}
	cc.partial = true
	cc.s.log.Info("kafka: request of more elements than kafka.max_request_elements; answered in part, the client asks again for the rest (logged once a connection)",
		"remote", cc.remote(), "api", api, "elements", n, "answered", limit, "limit", cc.s.cfg.MaxRequestElements)
}

// closeLocked closes the connection for reason (the first reason given
// is the one counted). s.mu is held.
func (cc *conn) closeLocked(reason string) {
	if cc.reason == "" {
		cc.reason = reason
	}
	_ = cc.c.Close()
}

// closing records reason as why the connection is about to close, once
// its last reply is written.
func (cc *conn) closing(reason string) {
	cc.s.mu.Lock()
	if cc.reason == "" {
		cc.reason = reason
	}
	cc.s.mu.Unlock()
}

// fail closes the connection for reason.
func (cc *conn) fail(reason string) {
	cc.s.mu.Lock()
	cc.closeLocked(reason)
	cc.s.mu.Unlock()
}

// maxPipelined bounds the responses a connection owes: past it, the
// next request is read once the oldest response is written.
const maxPipelined = 64

// reply is a response a connection owes, in request order.
type reply struct {
	resp kmsg.Response
	corr int32
	// key and read are the request's API key and when it was read, for
	// the metrics.
	key  int16
	read time.Time
	// finish, when set, waits for the effects the response reports (a
	// produce's durability) and completes it; the writer calls it.
	finish func()
	// raw, when set, is written as it is (a raw SASL exchange's answer).
	raw []byte
	// last closes the connection once the reply is written.
	last bool
}

// serve reads a connection's requests one at a time, in order, as a
// Kafka broker does; what a request changes is ordered before the next
// is read. Replies leave in request order from writeReplies, which waits
// for a produce's durability before its reply: a producer's requests in
// flight have their appends made durable together.
func (s *Server) serve(cc *conn) {
	c := cc.c
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	replies := make(chan reply, maxPipelined)
	written := make(chan struct{})
	go func() {
		defer close(written)
		cc.writeReplies(replies)
	}()
	defer func() {
		close(replies)
		<-written
	}()
	// A connection that has not authenticated gets a small buffer: a
	// flood of them costs little. The request buffer grows once the
	// connection authenticated (readBufferAuthenticated).
	r := bufio.NewReaderSize(c, readBufferUnauthenticated)
	grown := false
	var size [4]byte
	var produceBuf []byte
	for {
		_ = c.SetReadDeadline(cc.waitDeadline())
		if _, err := io.ReadFull(r, size[:1]); err != nil {
			cc.readFailed(err, false)
			return
		}
		_ = c.SetReadDeadline(cc.readDeadline())
		if _, err := io.ReadFull(r, size[1:]); err != nil {
			cc.readFailed(err, true)
			return
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		limit := s.cfg.MaxUnauthenticatedRequestBytes
		if cc.sess != nil {
			limit = s.cfg.MaxControlRequestBytes
			if n > limit {
				key, err := r.Peek(2)
				if err != nil {
					cc.readFailed(err, true)
					return
				}
				if walked(int16(binary.BigEndian.Uint16(key))) {
					limit = s.cfg.MaxRequestBytes
				}
			}
		}
		if (n < 8 && !cc.rawSASL) || n > limit {
			s.log.Info("kafka: request size refused; closing the connection", "remote", c.RemoteAddr(), "bytes", n, "limit", limit)
			cc.fail(reasonTooLarge)
			return
		}
		body, err := cc.readBody(r, n, &produceBuf)
		if err != nil {
			cc.readFailed(err, true)
			return
		}
		if cc.rawSASL {
			if !cc.rawSASLAuthenticate(body) {
				cc.fail(reasonAuthFailed)
				return
			}
			replies <- reply{raw: []byte{0, 0, 0, 0}}
			continue
		}
		read := time.Now()
		rp, keep := cc.handle(ctx, body)
		if cc.sess != nil && !grown {
			r = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bufferedOf(r)), c), readBufferAuthenticated)
			grown = true
		}
		rp.read = read
		if rp.resp == nil && keep { // an acks=0 produce: done once ordered
			s.cfg.Metrics.RequestDone(rp.key, 0, time.Since(read))
		}
		if rp.resp != nil { // nil: an acks=0 produce, or a connection to close
			rp.last = !keep
			replies <- rp
		}
		if !keep {
			return
		}
	}
}

// writeReplies writes the replies in order, flushing when no other is
// ready. A failed write closes the connection, which ends its reading.
func (cc *conn) writeReplies(replies <-chan reply) {
	var w *bufio.Writer
	var out []byte
	broken := false
	for rp := range replies {
		if rp.finish != nil {
			rp.finish()
		}
		if m := cc.s.cfg.Metrics; rp.resp != nil {
			// Before the write: a client that read its response finds
			// its request counted.
			m.RequestDone(rp.key, firstErrorCode(rp.resp), time.Since(rp.read))
		}
		if broken {
			continue
		}
		out = out[:0]
		if rp.raw != nil {
			out = append(out, rp.raw...)
		} else {
			out = append(out, 0, 0, 0, 0, 0, 0, 0, 0)
			if rp.resp.IsFlexible() && rp.resp.Key() != kmsg.ApiVersions.Int16() {
				out = append(out, 0) // the response header's empty tagged fields
			}
			out = rp.resp.AppendTo(out)
			binary.BigEndian.PutUint32(out[0:], uint32(len(out)-4))
			binary.BigEndian.PutUint32(out[4:], uint32(rp.corr))
		}
		if w == nil {
			w = bufio.NewWriterSize(cc.c, writeBuffer)
		}
		// A client that reads no reply for IdleTimeout is closed.
		_ = cc.c.SetWriteDeadline(time.Now().Add(cc.s.cfg.IdleTimeout))
		_, err := w.Write(out)
		if err == nil && (len(replies) == 0 || rp.last) {
			err = w.Flush()
		}
		if err != nil || rp.last {
			broken = true
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				cc.fail(reasonIdle)
			} else {
				cc.fail(reasonClientClosed) // or the reason the handler gave
			}
		}
	}
}

// handle parses and serves one request. It returns the reply (without a
// response for none) and whether the connection stays open.
func (cc *conn) handle(ctx context.Context, body []byte) (rp reply, keep bool) {
	rd := kbin.Reader{Src: body}
	key, version := rd.Int16(), rd.Int16()
	corr := rd.Int32()
	rp.corr, rp.key = corr, key
	if id := rd.NullableString(); id != nil {
		cc.clientID = *id
		if len(cc.clientID) > wire.MaxNameLen || !utf8.ValidString(cc.clientID) {
			cc.clientID = strings.ToValidUTF8(cc.clientID[:min(len(cc.clientID), wire.MaxNameLen)], "")
		}
	}
	req := newRequest(key)
	if req == nil {
		// Clients ask ApiVersions first and send only what it lists; a
		// Kafka broker closes the connection on an API it does not
		// serve, too.
		cc.s.log.Info("kafka: api not served; closing the connection", "remote", cc.c.RemoteAddr(), "key", key, "api", kmsg.NameForKey(key))
		cc.closing(reasonUnservedAPI)
		return rp, false
	}
	req.SetVersion(version)
	if cc.sess == nil {
		switch req.(type) {
		case *kmsg.ApiVersionsRequest, *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest:
		default:
			// A Kafka broker closes a connection that skips SASL.
			cc.s.log.Info("kafka: request before authentication; closing the connection", "remote", cc.c.RemoteAddr(), "key", kmsg.NameForKey(key))
			cc.closing(reasonBeforeAuth)
			return rp, false
		}
	}
	lo, hi, ok := supported(key)
	if !ok || version < lo || version > hi {
		if key == kmsg.ApiVersions.Int16() {
			// KIP-511: an ApiVersions the broker does not speak is
			// answered at v0 with the versions it does.
			r := kmsg.NewPtrApiVersionsResponse()
			r.ErrorCode = kerr.UnsupportedVersion.Code
			r.ApiKeys = apiKeys()
			rp.resp = r
			return rp, true
		}
		rp.resp = unsupportedResponse(req)
		return rp, true
	}
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		cc.closing(reasonMalformed)
		return rp, false
	}
	if err := checkClaims(key, version, req.IsFlexible(), rd.Src, len(body)); err != nil {
		cc.s.log.Info("kafka: request refused before decoding; closing the connection", "remote", cc.c.RemoteAddr(), "key", kmsg.NameForKey(key), "err", err)
		cc.closing(reasonMalformed)
		return rp, false
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		cc.s.log.Info("kafka: malformed request; closing the connection", "remote", cc.c.RemoteAddr(), "key", kmsg.NameForKey(key), "err", err)
		cc.closing(reasonMalformed)
		return rp, false
	}
	// A Fetch or an OffsetCommit past the bound is answered in part
	// (fetch, offsetCommit); its decoding is within the walk's budget, and
	// it is not counted here.
	if key != kmsg.Fetch.Int16() && key != kmsg.OffsetCommit.Int16() {
		if n := countElements(reflect.ValueOf(req)); n > cc.s.cfg.MaxRequestElements {
			cc.s.log.Info("kafka: request of too many elements; closing the connection", "remote", cc.c.RemoteAddr(), "key", kmsg.NameForKey(key), "elements", n, "limit", cc.s.cfg.MaxRequestElements)
			cc.closing(reasonTooLarge)
			return rp, false
		}
	}
	defer func() {
		if p := recover(); p != nil {
			cc.s.log.Error("kafka: request handler panicked", "key", kmsg.NameForKey(key), "panic", p, "stack", string(debug.Stack()))
			rp, keep = reply{}, false
			cc.closing(reasonHandlerFailure)
		}
	}()
	rp.resp, rp.finish, keep = cc.dispatch(ctx, req)
	return rp, keep
}

func (cc *conn) dispatch(ctx context.Context, req kmsg.Request) (kmsg.Response, func(), bool) {
	switch m := req.(type) {
	case *kmsg.ApiVersionsRequest:
		r := m.ResponseKind().(*kmsg.ApiVersionsResponse)
		r.ApiKeys = apiKeys()
		return r, nil, true
	case *kmsg.SASLHandshakeRequest:
		return cc.saslHandshake(m), nil, true
	case *kmsg.SASLAuthenticateRequest:
		r := cc.saslAuthenticate(m)
		if r.ErrorCode != 0 {
			cc.closing(reasonAuthFailed)
		}
		return r, nil, r.ErrorCode == 0
	case *kmsg.MetadataRequest:
		return cc.metadata(ctx, m), nil, true
	case *kmsg.ProduceRequest:
		r, finish := cc.produce(ctx, m)
		if m.Acks == 0 {
			return nil, nil, true // nothing to answer, so nothing to wait for
		}
		return r, finish, true
	case *kmsg.FetchRequest:
		return cc.fetch(ctx, m), nil, true
	case *kmsg.ListOffsetsRequest:
		return cc.listOffsets(ctx, m), nil, true
	case *kmsg.OffsetForLeaderEpochRequest:
		return cc.offsetForLeaderEpoch(ctx, m), nil, true
	case *kmsg.InitProducerIDRequest:
		return cc.initProducerID(ctx, m), nil, true
	case *kmsg.FindCoordinatorRequest:
		return cc.findCoordinator(m), nil, true
	case *kmsg.CreateTopicsRequest:
		return cc.createTopics(ctx, m), nil, true
	case *kmsg.DeleteTopicsRequest:
		return cc.deleteTopics(ctx, m), nil, true
	case *kmsg.DeleteRecordsRequest:
		return cc.deleteRecords(ctx, m), nil, true
	case *kmsg.JoinGroupRequest:
		return cc.joinGroup(ctx, m), nil, true
	case *kmsg.SyncGroupRequest:
		return cc.syncGroup(ctx, m), nil, true
	case *kmsg.HeartbeatRequest:
		return cc.heartbeat(ctx, m), nil, true
	case *kmsg.LeaveGroupRequest:
		return cc.leaveGroup(ctx, m), nil, true
	case *kmsg.OffsetCommitRequest:
		return cc.offsetCommit(ctx, m), nil, true
	case *kmsg.OffsetFetchRequest:
		return cc.offsetFetch(ctx, m), nil, true
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return cc.consumerGroupHeartbeat(ctx, m), nil, true
	case *kmsg.DescribeGroupsRequest:
		return cc.describeGroups(ctx, m), nil, true
	case *kmsg.ListGroupsRequest:
		return cc.listGroups(ctx, m), nil, true
	}
	return unsupportedResponse(req), nil, true
}

// unsupportedResponse answers a request this listener does not serve:
// the response of its kind at the version asked, with UNSUPPORTED_VERSION
// wherever the response has an error code.
func unsupportedResponse(req kmsg.Request) kmsg.Response {
	r := req.ResponseKind()
	setErrorCodes(r, kerr.UnsupportedVersion.Code)
	return r
}

// remote names a connection in logs.
func (cc *conn) remote() string { return cc.c.RemoteAddr().String() }

// host is the IP address the client connects from.
func (cc *conn) host() string {
	if a, ok := cc.c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

// advertised is the host and port clients reach this listener at: the
// address the connection came in on.
func (cc *conn) advertised() (string, int32) {
	host, port, err := net.SplitHostPort(cc.c.LocalAddr().String())
	if err != nil {
		return "127.0.0.1", 9092
	}
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}
