package kafka

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A connection's bounds: its place in the admission, the deadlines of its
// reads, and the reading of a request's bytes.

// Reasons a connection is refused or closed, the metrics' label values.
const (
	reasonConnLimit      = "conn_limit"      // MaxConns authenticated connections
	reasonTokenLimit     = "token_limit"     // the token's bound of connections (a shared Admission's)
	reasonEvicted        = "evicted"         // pushed out by a newer unauthenticated one
	reasonAuthTimeout    = "auth_timeout"    // AuthTimeout passed before authentication
	reasonAuthFailed     = "auth_failed"     // SASL refused
	reasonBeforeAuth     = "before_auth"     // a request other than ApiVersions or SASL before authentication
	reasonIdle           = "idle"            // IdleTimeout without a request, or a reply unread
	reasonReadTimeout    = "read_timeout"    // a request begun and not continued for ReadTimeout
	reasonTooLarge       = "too_large"       // a request over its bound
	reasonMalformed      = "malformed"       // a request that does not parse
	reasonUnservedAPI    = "unserved_api"    // a request of an API the listener does not serve
	reasonRevoked        = "revoked"         // the token was revoked
	reasonShutdown       = "shutdown"        // the listener closed
	reasonClientClosed   = "client_closed"   // the client closed it, or the network failed
	reasonHandlerFailure = "handler_failure" // a request's handler failed
)

// admit registers an accepted connection, or closes it and says why (""
// when the listener is closing). A new connection takes an
// unauthenticated place in the admission, which may evict the oldest
// unauthenticated connection.
func (s *Server) admit(c net.Conn) (*conn, string) {
	if s.ctx.Err() != nil {
		_ = c.Close()
		return nil, ""
	}
	place, err := s.adm.Admit(c.RemoteAddr())
	if err != nil {
		_ = c.Close()
		return nil, admissionReason(err)
	}
	cc := &conn{s: s, c: c, place: place, authDeadline: time.Now().Add(s.cfg.AuthTimeout)}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		place.Release()
		_ = c.Close()
		return nil, ""
	}
	s.conns[c] = cc
	s.mu.Unlock()
	cc.stopEviction = place.OnEvicted(func() { cc.fail(reasonEvicted) })
	return cc, ""
}

// authenticated moves cc among the authenticated connections, with its
// session. It reports false, closing the connection, when the admission
// refuses it (evicted meanwhile, or a cap of authenticated connections
// reached).
func (s *Server) authenticated(cc *conn, sess Session) bool {
	cc.stopEviction()
	tokenID := ""
	if t, ok := sess.(TokenIdentified); ok {
		tokenID = t.TokenID()
	}
	if err := cc.place.Authenticated(tokenID); err != nil {
		cc.fail(admissionReason(err))
		return false
	}
	s.mu.Lock()
	cc.sess = sess
	s.mu.Unlock()
	return true
}

// release forgets a connection that is done, and counts why it closed.
func (s *Server) release(cc *conn) {
	cc.stopEviction()
	cc.place.Release()
	s.mu.Lock()
	delete(s.conns, cc.c)
	cc.closeLocked(reasonClientClosed)
	reason := cc.reason
	s.mu.Unlock()
	s.cfg.Metrics.ConnectionClosed(reason)
}

// readFailed closes the connection after a failed read: a deadline that
// passed says which bound, anything else is the client's doing (or a
// close already counted). begun: part of a request had arrived.
func (cc *conn) readFailed(err error, begun bool) {
	var ne net.Error
	switch {
	case !errors.As(err, &ne) || !ne.Timeout():
		cc.fail(reasonClientClosed)
	case cc.sess == nil && !time.Now().Before(cc.authDeadline):
		cc.fail(reasonAuthTimeout)
	case begun:
		cc.fail(reasonReadTimeout)
	default:
		cc.fail(reasonIdle)
	}
}

// waitDeadline is the read deadline while the connection waits for a
// request: the authentication deadline before it authenticated, the
// idle timeout after.
func (cc *conn) waitDeadline() time.Time {
	if cc.sess == nil {
		return cc.authDeadline
	}
	return time.Now().Add(cc.s.cfg.IdleTimeout)
}

// readDeadline is the read deadline within a request: ReadTimeout from
// now, and never past the authentication deadline.
func (cc *conn) readDeadline() time.Time {
	d := time.Now().Add(cc.s.cfg.ReadTimeout)
	if cc.sess == nil && cc.authDeadline.Before(d) {
		return cc.authDeadline
	}
	return d
}

// The read buffers of a connection before and after it authenticated.
const (
	readBufferUnauthenticated = 1 << 10
	readBufferAuthenticated   = 64 << 10
	// writeBuffer is the write buffer of a connection, allocated with
	// its first reply; a reply larger (a fetch's) is written through.
	writeBuffer = 16 << 10
)

// bufferedOf returns what r has read from its source and not handed out
// yet, a copy.
func bufferedOf(r *bufio.Reader) []byte {
	b, _ := r.Peek(r.Buffered())
	return bytes.Clone(b)
}

// maxReusedBody bounds the Produce buffer a connection keeps: past it (a
// client's batches are 1 MiB by default), a request gets its own.
const maxReusedBody = 4 << 20

// readChunk is how much more of a request is allocated at a time, at
// least, as its bytes arrive: a request that announces more than it
// sends costs what it sent, not what it announced.
const readChunk = 64 << 10

// readBody reads a request of n bytes, growing its buffer as the bytes
// arrive (doubling from readChunk), each read within ReadTimeout. A
// Produce request is read into *reuse, the connection's buffer for them:
// nothing of it outlives its handling, its batches being converted into
// new ones. Any other request gets its own slice, since what it carries
// (a group member's metadata, say) may be kept.
func (cc *conn) readBody(r *bufio.Reader, n int, reuse *[]byte) ([]byte, error) {
	produce := false
	if key, err := r.Peek(2); err == nil && !cc.rawSASL && int16(binary.BigEndian.Uint16(key)) == kmsg.Produce.Int16() {
		produce = true
	}
	var body []byte
	if produce && cap(*reuse) >= n {
		body = (*reuse)[:0]
	}
	for len(body) < n {
		if len(body) == cap(body) {
			body = slices.Grow(body, min(n-len(body), max(readChunk, len(body))))
		}
		_ = cc.c.SetReadDeadline(cc.readDeadline())
		k, err := r.Read(body[len(body):min(n, cap(body))])
		body = body[:len(body)+k]
		if err != nil && len(body) < n {
			return nil, err
		}
	}
	if produce && n <= maxReusedBody && cap(body) > cap(*reuse) {
		*reuse = body[:0]
	}
	return body, nil
}
