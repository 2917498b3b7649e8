package kafka

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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

// DefaultMaxRequestBytes bounds one request's size before it is read.
const DefaultMaxRequestBytes = 100 << 20

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
	// MaxRequestBytes bounds a request; a larger one closes the
	// connection. Default DefaultMaxRequestBytes.
	MaxRequestBytes int
	// Metrics receives one call per request answered. Default: none.
	Metrics Metrics
}

// Server is a Kafka listener in front of a node.
type Server struct {
	cfg    Config
	log    *slog.Logger
	ln     net.Listener
	groups *classicGroups

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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "ledge"
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("kafka: listen: %w", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ln: ln, conns: map[net.Conn]*conn{}, groups: newClassicGroups()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.work.Go(s.accept)
	return s, nil
}

// Addr is the address the listener is bound to.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting, ends every connection (parked fetches included)
// and waits for their handlers to return.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
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
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		cc := &conn{s: s, c: c}
		s.conns[c] = cc
		s.mu.Unlock()
		s.work.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				_ = c.Close()
			}()
			s.serve(cc)
		})
	}
}

// CloseSessions closes every connection whose session match accepts
// (the node closes those of a revoked token), parked fetches included,
// and returns how many it closed.
func (s *Server) CloseSessions(match func(Session) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c, cc := range s.conns {
		if cc.sess != nil && match(cc.sess) {
			_ = c.Close()
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
	mech string // the mechanism SaslHandshake chose
	// rawSASL: a SaslHandshake v0 was answered, so the next frame is the
	// SASL exchange itself.
	rawSASL bool
	// clientID is the client id of the connection's latest request
	// header, cut to a name's length; joins carry it.
	clientID string
	// conv converts the connection's produced batches.
	conv converter
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
	r := bufio.NewReaderSize(c, 64<<10)
	var size [4]byte
	var produceBuf []byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if (n < 8 && !cc.rawSASL) || n > s.cfg.MaxRequestBytes {
			s.log.Info("kafka: request size refused; closing the connection", "remote", c.RemoteAddr(), "bytes", n)
			return
		}
		body, err := cc.readBody(r, n, &produceBuf)
		if err != nil {
			return
		}
		if cc.rawSASL {
			if !cc.rawSASLAuthenticate(body) {
				return
			}
			replies <- reply{raw: []byte{0, 0, 0, 0}}
			continue
		}
		read := time.Now()
		rp, keep := cc.handle(ctx, body)
		rp.read = read
		if rp.resp == nil && keep && s.cfg.Metrics != nil { // an acks=0 produce: done once ordered
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

// maxReusedBody bounds the Produce buffer a connection keeps: past it (a
// client's batches are 1 MiB by default), a request gets its own.
const maxReusedBody = 4 << 20

// readBody reads a request of n bytes. A Produce request is read into
// *reuse, the connection's buffer for them: nothing of it outlives its
// handling, its batches being converted into new ones. Any other request
// gets its own slice, since what it carries (a group member's metadata,
// say) may be kept.
func (cc *conn) readBody(r *bufio.Reader, n int, reuse *[]byte) ([]byte, error) {
	if key, err := r.Peek(2); err == nil && n <= maxReusedBody && !cc.rawSASL && int16(binary.BigEndian.Uint16(key)) == kmsg.Produce.Int16() {
		if cap(*reuse) < n {
			*reuse = make([]byte, n)
		}
		body := (*reuse)[:n]
		_, err := io.ReadFull(r, body)
		return body, err
	}
	body := make([]byte, n)
	_, err := io.ReadFull(r, body)
	return body, err
}

// writeReplies writes the replies in order, flushing when no other is
// ready. A failed write closes the connection, which ends its reading.
func (cc *conn) writeReplies(replies <-chan reply) {
	w := bufio.NewWriterSize(cc.c, 64<<10)
	var out []byte
	broken := false
	for rp := range replies {
		if rp.finish != nil {
			rp.finish()
		}
		if m := cc.s.cfg.Metrics; m != nil && rp.resp != nil {
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
		_, err := w.Write(out)
		if err == nil && (len(replies) == 0 || rp.last) {
			err = w.Flush()
		}
		if err != nil || rp.last {
			broken = true
			_ = cc.c.Close()
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
	req := kmsg.RequestForKey(key)
	if req == nil {
		cc.s.log.Info("kafka: unknown api key; closing the connection", "remote", cc.c.RemoteAddr(), "key", key)
		return rp, false
	}
	req.SetVersion(version)
	if cc.sess == nil {
		switch req.(type) {
		case *kmsg.ApiVersionsRequest, *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest:
		default:
			// A Kafka broker closes a connection that skips SASL.
			cc.s.log.Info("kafka: request before authentication; closing the connection", "remote", cc.c.RemoteAddr(), "key", kmsg.NameForKey(key))
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
		return rp, false
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		cc.s.log.Info("kafka: malformed request; closing the connection", "remote", cc.c.RemoteAddr(), "key", kmsg.NameForKey(key), "err", err)
		return rp, false
	}
	defer func() {
		if p := recover(); p != nil {
			cc.s.log.Error("kafka: request handler panicked", "key", kmsg.NameForKey(key), "panic", p, "stack", string(debug.Stack()))
			rp, keep = reply{}, false
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
