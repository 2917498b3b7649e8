package quic

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	quicgo "github.com/quic-go/quic-go"
)

// Code is an application error code carried by a QUIC CONNECTION_CLOSE or
// a stream reset. The numbers are part of the protocol.
type Code uint64

// Codes. The comment says what a client should do.
const (
	CodeNoError         Code = 0x0 // normal close
	CodeShutdown        Code = 0x1 // the node is shutting down: reconnect later; unanswered requests were not processed
	CodeUnauthenticated Code = 0x2 // authentication refused: fix the credentials, do not retry as is
	CodeTokenRevoked    Code = 0x3 // the connection's token was revoked: do not retry with it
	CodeAuthTimeout     Code = 0x4 // no authentication frame in time: reconnect
	CodeProtocolError   Code = 0x5 // a malformed frame: a bug on one side, do not retry as is
	CodeFrameTooLarge   Code = 0x6 // a frame over the limit (stream reset): shrink the request
	CodeInternal        Code = 0x7 // the node failed: retry later
	CodeStreamClosed    Code = 0x8 // the node is done with the stream (stream reset): open another
	CodeConnectionLimit Code = 0x9 // authenticated, but the node (or the token) is at its connection limit: retry later
)

// String names the code.
func (c Code) String() string {
	switch c {
	case CodeNoError:
		return "no error"
	case CodeShutdown:
		return "shutting down"
	case CodeUnauthenticated:
		return "unauthenticated"
	case CodeTokenRevoked:
		return "token revoked"
	case CodeAuthTimeout:
		return "authentication timeout"
	case CodeProtocolError:
		return "protocol error"
	case CodeFrameTooLarge:
		return "frame too large"
	case CodeInternal:
		return "internal error"
	case CodeStreamClosed:
		return "stream closed"
	case CodeConnectionLimit:
		return "connection limit"
	}
	return "code 0x" + strconv.FormatUint(uint64(c), 16)
}

// Sentinel errors, for errors.Is. Each says whether retrying helps.
var (
	// ErrServerClosed: the listener is shutting down or closed, or the
	// server closed the connection with CodeShutdown. Retry later, on a new
	// connection; requests that got no reply were not processed.
	ErrServerClosed = errors.New("quic: server closed")
	// ErrUnauthenticated: the server refused the credentials. Do not retry
	// with the same ones.
	ErrUnauthenticated = errors.New("quic: authentication refused")
	// ErrTokenRevoked: the token the connection authenticated with was
	// revoked. Do not retry with it.
	ErrTokenRevoked = errors.New("quic: token revoked")
	// ErrAuthTimeout: the authentication frame did not arrive in time.
	// Retry on a new connection.
	ErrAuthTimeout = errors.New("quic: authentication timed out")
	// ErrFrameTooLarge: a frame exceeded the size limit and its stream was
	// reset. Retrying the same request fails the same way.
	ErrFrameTooLarge = errors.New("quic: frame too large")
	// ErrProtocol: a frame header was malformed. Do not retry as is.
	ErrProtocol = errors.New("quic: protocol error")
	// ErrConnectionRefused: the server refused the connection: before the
	// handshake (at its connection limit, too many handshakes from the
	// address, its handshakes waiting too long, or shutting down), during
	// it (evicted to make room for newer ones), or after authentication
	// with [CodeConnectionLimit]. Retry later, after a pause.
	ErrConnectionRefused = errors.New("quic: connection refused")
	// ErrNotProcessed: the stream ended before a request was answered, and
	// the server's replies are in request order, so the request was never
	// read. Safe to retry.
	ErrNotProcessed = errors.New("quic: request not processed")
	// ErrClosed: the local side closed the connection or stream.
	ErrClosed = errors.New("quic: closed")
)

func codeSentinel(c Code) error {
	switch c {
	case CodeShutdown:
		return ErrServerClosed
	case CodeUnauthenticated:
		return ErrUnauthenticated
	case CodeTokenRevoked:
		return ErrTokenRevoked
	case CodeAuthTimeout:
		return ErrAuthTimeout
	case CodeFrameTooLarge:
		return ErrFrameTooLarge
	case CodeProtocolError:
		return ErrProtocol
	case CodeStreamClosed:
		return ErrNotProcessed
	case CodeConnectionLimit:
		return ErrConnectionRefused
	}
	return nil
}

// CloseError is a connection closed with an application code, by the peer
// (Remote) or locally. errors.Is matches it against the sentinel of its
// code (CodeShutdown is ErrServerClosed, and so on).
type CloseError struct {
	Code   Code
	Reason string
	Remote bool
}

func (e *CloseError) Error() string {
	who := "locally"
	if e.Remote {
		who = "by the peer"
	}
	if e.Reason == "" {
		return fmt.Sprintf("quic: connection closed %s: %v", who, e.Code)
	}
	return fmt.Sprintf("quic: connection closed %s: %v: %s", who, e.Code, e.Reason)
}

// Is matches the sentinel of the code.
func (e *CloseError) Is(target error) bool {
	return target != nil && codeSentinel(e.Code) == target
}

// StreamResetError is a stream aborted with an application code.
type StreamResetError struct {
	StreamID int64
	Code     Code
	Remote   bool
}

func (e *StreamResetError) Error() string {
	who := "locally"
	if e.Remote {
		who = "by the peer"
	}
	return fmt.Sprintf("quic: stream %d reset %s: %v", e.StreamID, who, e.Code)
}

// Is matches the sentinel of the code.
func (e *StreamResetError) Is(target error) bool {
	return target != nil && codeSentinel(e.Code) == target
}

// FrameTooLargeError reports a frame over the limit, detected from its
// header before anything was allocated. It matches ErrFrameTooLarge.
type FrameTooLargeError struct {
	Size, Max int
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("quic: frame of %d bytes exceeds the limit of %d", e.Size, e.Max)
}

// Is matches ErrFrameTooLarge.
func (e *FrameTooLargeError) Is(target error) bool { return target == ErrFrameTooLarge }

// IsRetryable reports whether an error of this package means "try again"
// (on a new connection where the connection is gone) rather than "give up":
// shutdowns, refused connections, unprocessed requests, timeouts and
// network failures are retryable; refused credentials, revoked tokens,
// oversized and malformed frames are not.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrUnauthenticated), errors.Is(err, ErrTokenRevoked),
		errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrProtocol):
		return false
	case errors.Is(err, ErrServerClosed), errors.Is(err, ErrConnectionRefused),
		errors.Is(err, ErrNotProcessed), errors.Is(err, ErrAuthTimeout):
		return true
	}
	var ce *CloseError
	if errors.As(err, &ce) {
		return ce.Code == CodeInternal || ce.Code == CodeNoError
	}
	var idle *quicgo.IdleTimeoutError
	var hs *quicgo.HandshakeTimeoutError
	var reset *quicgo.StatelessResetError
	return errors.As(err, &idle) || errors.As(err, &hs) || errors.As(err, &reset) || isTimeout(err)
}

// mapError turns quic-go's errors into this package's: application codes
// become *CloseError or *StreamResetError, a refused connection matches
// ErrConnectionRefused. Other errors pass through.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var ae *quicgo.ApplicationError
	if errors.As(err, &ae) {
		return &CloseError{Code: Code(ae.ErrorCode), Reason: ae.ErrorMessage, Remote: ae.Remote}
	}
	var se *quicgo.StreamError
	if errors.As(err, &se) {
		return &StreamResetError{StreamID: int64(se.StreamID), Code: Code(se.ErrorCode), Remote: se.Remote}
	}
	var te *quicgo.TransportError
	if errors.As(err, &te) && (te.ErrorCode == quicgo.ConnectionRefused ||
		te.Remote && (te.ErrorCode == quicgo.ApplicationErrorErrorCode || te.ErrorCode == tlsInternalError)) {
		// The second: the node closed the connection with a code of ours
		// before the handshake was done, which QUIC does not let it say
		// in the clear. A listener does that only to shed the connection
		// (evicted to make room, shutting down, at its limit). The third:
		// its TLS failed on its side, which a listener does on purpose to
		// a handshake that would be wasted (Listener.notedTakeUp). Retry.
		return fmt.Errorf("%w: %w", ErrConnectionRefused, err)
	}
	return err
}

// tlsInternalError is QUIC's CRYPTO_ERROR carrying TLS's internal_error
// alert (RFC 9001, 4.8).
const tlsInternalError = quicgo.TransportErrorCode(0x100 + 80)

func truncateReason(s string) string {
	if len(s) > maxCloseReasonLen {
		return s[:maxCloseReasonLen]
	}
	return s
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
