package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/ledgemq/ledge/transport/wire"
)

// Server defaults. The package comment explains each choice.
const (
	DefaultMaxIncomingStreams                   = 1024
	DefaultServerInitialStreamWindow            = 768 << 10
	DefaultServerMaxStreamWindow                = 8 << 20
	DefaultServerInitialConnectionWindow        = 256 << 10
	DefaultServerMaxConnectionWindow            = 32 << 20
	DefaultReceiveWindowBudget                  = 256 << 20
	DefaultMaxConns                             = 4096
	DefaultMaxUnauthenticated                   = 256
	DefaultSourceHandshakeRate                  = 50
	DefaultSourceHandshakeBurst                 = 100
	sourceTableSize                             = 8192
	DefaultMaxRequestFrame                      = wire.DefaultMaxFrameSize
	DefaultInflightBudget                       = 64 << 20
	DefaultMaxIdleTimeout                       = 60 * time.Second
	DefaultHandshakeTimeout                     = 10 * time.Second
	DefaultHandshakeWaitTarget                  = 250 * time.Millisecond
	DefaultAuthTimeout                          = 5 * time.Second
	DefaultClientInitialStreamWindow            = 2 << 20
	DefaultClientMaxStreamWindow                = 16 << 20
	DefaultClientInitialConnectionWindow        = 4 << 20
	DefaultClientMaxConnectionWindow            = 64 << 20
	DefaultMaxReplyFrame                        = 64 << 20
	DefaultClientKeepAlivePeriod                = 15 * time.Second
	defaultStreamBufferSize                     = 64 << 10
	maxCloseReasonLen                           = 256
	minWindow                            uint64 = 16 << 10
)

// Identity is what a successful authentication yields.
type Identity struct {
	// TokenID names the credential the connection authenticated with;
	// [Listener.CloseToken] closes every connection of one token id.
	TokenID string
	// Value is the node's own record of the principal (scopes and the
	// like). The transport does not look at it.
	Value any
}

// AuthRequest is the first frame of a connection and what is known of the
// peer.
type AuthRequest struct {
	Frame      []byte // the whole frame, header included
	RemoteAddr net.Addr
	TLS        tls.ConnectionState
}

// Authenticator decides whether a connection may proceed. It returns the
// identity and a reply frame to send on the first stream (nil for none). An
// error closes the connection: a *[CloseError] chooses the code and reason,
// any other error closes it with [CodeUnauthenticated] and the error's text
// as the reason (so keep it free of secrets).
type Authenticator func(ctx context.Context, req AuthRequest) (id Identity, reply []byte, err error)

// Config configures a [Listener]. The zero value of a field picks the
// documented default.
type Config struct {
	// MaxIncomingStreams is how many bidirectional streams a client may have
	// open at once. Default 1024 (quic-go's own default is 100).
	MaxIncomingStreams int64
	// InitialStreamReceiveWindow and MaxStreamReceiveWindow bound what a
	// client may send on one stream before the server reads it. Defaults
	// 768 KiB and 8 MiB; the window grows from the first toward the second
	// while the server keeps reading faster than the round trip.
	InitialStreamReceiveWindow, MaxStreamReceiveWindow uint64
	// InitialConnectionReceiveWindow and MaxConnectionReceiveWindow bound
	// the same over all streams of a connection. Defaults 256 KiB and
	// 32 MiB.
	InitialConnectionReceiveWindow, MaxConnectionReceiveWindow uint64
	// ReceiveWindowBudget bounds the growth of connection receive windows
	// beyond their initial size, over all connections together: a window
	// grows (toward MaxConnectionReceiveWindow) only while the budget
	// covers it, and only once its connection has authenticated. What
	// quic-go may buffer for the server is at most
	// (MaxConns + MaxUnauthenticated) × InitialConnectionReceiveWindow +
	// ReceiveWindowBudget. Default 256 MiB.
	ReceiveWindowBudget uint64
	// MaxConns is the number of authenticated connections past which new
	// connections are refused with CONNECTION_REFUSED, before any TLS work
	// (one that authenticates while the limit is reached is closed with
	// [CodeConnectionLimit]). Connections still handshaking or
	// authenticating do not count: they have their own bound,
	// MaxUnauthenticated. Default 4096.
	MaxConns int
	// MaxUnauthenticated bounds the connections that have not authenticated
	// yet (handshaking, or waiting for their authentication frame). One
	// more arriving evicts the oldest of them, which is closed with
	// [CodeAuthTimeout]: abandoned dials push out abandoned dials, never an
	// authenticated connection, and a client that authenticates promptly
	// is done long before. Default 256.
	MaxUnauthenticated int
	// MaxConnsPerToken bounds the authenticated connections of one token
	// id; one more is closed with [CodeConnectionLimit] after it
	// authenticates. Default 0: no bound (a fleet may share a token).
	MaxConnsPerToken int
	// SourceHandshakeRate and SourceHandshakeBurst are a token bucket of
	// handshakes per source address (IPv4 address or IPv6 /64): a new
	// connection takes a token, and gives it back once it authenticates, so
	// the bucket limits handshakes that lead nowhere. A connection from a
	// source with an empty bucket is refused with CONNECTION_REFUSED.
	// Defaults 50 per second and 100; a negative rate disables the limit.
	SourceHandshakeRate  float64
	SourceHandshakeBurst int
	// HandshakeWaitTarget bounds how long new connections wait for the
	// node to take up their handshake (from the first packet to the TLS
	// work on the ClientHello). While every handshake the node took up
	// over the last 100 ms had waited longer, new connections are refused
	// with CONNECTION_REFUSED before any TLS work (the client's
	// ErrConnectionRefused: retry after a pause), so that a crowd of
	// clients dialing at once is served at the rate the node does
	// handshakes instead of each handshake slowing down until its client
	// gives up on it. Default 250 ms; negative disables the bound.
	HandshakeWaitTarget time.Duration
	// MaxFrameSize bounds one request frame, header included. A larger one
	// resets its stream with [CodeFrameTooLarge]; other streams go on.
	// Default 8 MiB.
	MaxFrameSize int
	// InflightBudget bounds the bytes of requests read but not yet answered,
	// over all connections. A stream reader that would exceed it waits, so
	// QUIC flow control pushes back on the client. Default 64 MiB; at least
	// MaxFrameSize.
	InflightBudget int64
	// MaxIdleTimeout closes a connection after this long without a packet
	// from the peer. Default 60 s. Clients send keep-alives (see
	// [ClientConfig.KeepAlivePeriod]), so only dead peers hit it.
	MaxIdleTimeout time.Duration
	// KeepAlivePeriod makes the server send keep-alives too. Default 0:
	// clients keep their connections (and NAT bindings) alive.
	KeepAlivePeriod time.Duration
	// HandshakeTimeout bounds the QUIC and TLS handshake. Default 10 s.
	HandshakeTimeout time.Duration
	// AuthTimeout bounds the wait for the authentication frame after the
	// handshake. Default 5 s.
	AuthTimeout time.Duration
	// Framing tells where frames end. Default [WireFraming].
	Framing Framing
	// StatelessResetKey, when set, lets the listener answer packets of
	// connections it does not know with a stateless reset, so that clients
	// of a node that restarted learn it at once instead of after their idle
	// timeout. It must stay the same across restarts (derive it from a
	// secret kept in the data directory) and be secret. Default: nil, no
	// stateless resets.
	StatelessResetKey *[32]byte
	// Authenticate checks the first frame of the first stream of every
	// connection. Nil means no authentication frame is expected (tests and
	// benchmarks; a node always sets it).
	Authenticate Authenticator
	// OnBackpressure, when set, is called each time a stream reader starts
	// waiting for the in-flight budget, with the size of the frame it waits
	// for. It must not block.
	OnBackpressure func(frameBytes int)
	// Logger receives connection-level events. Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	setDefault(&c.MaxIncomingStreams, DefaultMaxIncomingStreams)
	setDefault(&c.InitialStreamReceiveWindow, DefaultServerInitialStreamWindow)
	setDefault(&c.MaxStreamReceiveWindow, DefaultServerMaxStreamWindow)
	setDefault(&c.InitialConnectionReceiveWindow, DefaultServerInitialConnectionWindow)
	setDefault(&c.MaxConnectionReceiveWindow, DefaultServerMaxConnectionWindow)
	setDefault(&c.ReceiveWindowBudget, DefaultReceiveWindowBudget)
	setDefault(&c.MaxConns, DefaultMaxConns)
	setDefault(&c.MaxUnauthenticated, DefaultMaxUnauthenticated)
	setDefault(&c.SourceHandshakeRate, DefaultSourceHandshakeRate)
	setDefault(&c.SourceHandshakeBurst, DefaultSourceHandshakeBurst)
	setDefault(&c.MaxFrameSize, DefaultMaxRequestFrame)
	setDefault(&c.InflightBudget, DefaultInflightBudget)
	setDefault(&c.MaxIdleTimeout, DefaultMaxIdleTimeout)
	setDefault(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	setDefault(&c.HandshakeWaitTarget, DefaultHandshakeWaitTarget)
	setDefault(&c.AuthTimeout, DefaultAuthTimeout)
	if c.Framing.FrameLen == nil {
		c.Framing = WireFraming()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	errs = append(errs, checkWindows("stream", c.InitialStreamReceiveWindow, c.MaxStreamReceiveWindow))
	errs = append(errs, checkWindows("connection", c.InitialConnectionReceiveWindow, c.MaxConnectionReceiveWindow))
	if c.Framing.HeaderLen <= 0 || c.MaxFrameSize < c.Framing.HeaderLen {
		errs = append(errs, fmt.Errorf("MaxFrameSize (%d) must hold a frame header (%d bytes)", c.MaxFrameSize, c.Framing.HeaderLen))
	}
	if c.InflightBudget < int64(c.MaxFrameSize) {
		errs = append(errs, fmt.Errorf("InflightBudget (%d) is below MaxFrameSize (%d): a largest frame could never be read",
			c.InflightBudget, c.MaxFrameSize))
	}
	if c.MaxIncomingStreams < 0 || c.MaxConns < 0 || c.MaxUnauthenticated < 0 || c.MaxConnsPerToken < 0 || c.SourceHandshakeBurst < 0 {
		errs = append(errs, errors.New("MaxIncomingStreams, MaxConns, MaxUnauthenticated, MaxConnsPerToken and SourceHandshakeBurst must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("quic: invalid config: %w", err)
	}
	return c, nil
}

func (c Config) admissionLimits() admissionLimits {
	return admissionLimits{
		maxAuthenticated:   c.MaxConns,
		maxUnauthenticated: c.MaxUnauthenticated,
		maxPerToken:        c.MaxConnsPerToken,
		sourceRate:         max(c.SourceHandshakeRate, 0),
		sourceBurst:        float64(c.SourceHandshakeBurst),
		maxSources:         sourceTableSize,
		windowBudget:       c.ReceiveWindowBudget,
		handshakeWait:      max(c.HandshakeWaitTarget, 0),
	}
}

// quicConfig is the quic-go configuration of a listener.
func (c Config) quicConfig(allowIncrease func(*quicgo.Conn, uint64) bool) *quicgo.Config {
	return &quicgo.Config{
		HandshakeIdleTimeout:           c.HandshakeTimeout / 2, // quic-go bounds the whole handshake at twice this
		MaxIdleTimeout:                 c.MaxIdleTimeout,
		KeepAlivePeriod:                c.KeepAlivePeriod,
		InitialStreamReceiveWindow:     c.InitialStreamReceiveWindow,
		MaxStreamReceiveWindow:         c.MaxStreamReceiveWindow,
		InitialConnectionReceiveWindow: c.InitialConnectionReceiveWindow,
		MaxConnectionReceiveWindow:     c.MaxConnectionReceiveWindow,
		AllowConnectionWindowIncrease:  allowIncrease,
		MaxIncomingStreams:             c.MaxIncomingStreams,
		MaxIncomingUniStreams:          -1, // the protocol uses bidirectional streams only
		// Ending a stream after a bad frame delivers the replies written so
		// far reliably, then the reason (RESET_STREAM_AT).
		EnableStreamResetPartialDelivery: true,
	}
}

// ClientConfig configures [Dial]. The zero value of a field picks the
// documented default.
type ClientConfig struct {
	// InitialStreamReceiveWindow and MaxStreamReceiveWindow bound what the
	// server may send on one stream before the client reads it: poll replies
	// are the large frames of the protocol. Defaults 2 MiB and 16 MiB.
	InitialStreamReceiveWindow, MaxStreamReceiveWindow uint64
	// InitialConnectionReceiveWindow and MaxConnectionReceiveWindow: the
	// same over all streams. Defaults 4 MiB and 64 MiB.
	InitialConnectionReceiveWindow, MaxConnectionReceiveWindow uint64
	// MaxFrameSize bounds one reply frame, header included. A larger one
	// resets its stream. Default 64 MiB.
	MaxFrameSize int
	// MaxIdleTimeout closes the connection after this long without a packet
	// from the server. Default 60 s.
	MaxIdleTimeout time.Duration
	// KeepAlivePeriod is how often the client sends a keep-alive when the
	// connection is otherwise quiet (long polls can be). Default 15 s;
	// negative disables.
	KeepAlivePeriod time.Duration
	// HandshakeTimeout bounds the QUIC and TLS handshake. Default 10 s.
	HandshakeTimeout time.Duration
	// Framing tells where frames end. Default [WireFraming].
	Framing Framing
	// Transport, when set, is the socket the connection shares with
	// others (see [Transport]). Default nil: a socket of its own, closed
	// with the connection.
	Transport *Transport
}

func (c ClientConfig) withDefaults() (ClientConfig, error) {
	setDefault(&c.InitialStreamReceiveWindow, DefaultClientInitialStreamWindow)
	setDefault(&c.MaxStreamReceiveWindow, DefaultClientMaxStreamWindow)
	setDefault(&c.InitialConnectionReceiveWindow, DefaultClientInitialConnectionWindow)
	setDefault(&c.MaxConnectionReceiveWindow, DefaultClientMaxConnectionWindow)
	setDefault(&c.MaxFrameSize, DefaultMaxReplyFrame)
	setDefault(&c.MaxIdleTimeout, DefaultMaxIdleTimeout)
	setDefault(&c.KeepAlivePeriod, DefaultClientKeepAlivePeriod)
	setDefault(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	if c.KeepAlivePeriod < 0 {
		c.KeepAlivePeriod = 0
	}
	if c.Framing.FrameLen == nil {
		c.Framing = WireFraming()
	}
	err := errors.Join(
		checkWindows("stream", c.InitialStreamReceiveWindow, c.MaxStreamReceiveWindow),
		checkWindows("connection", c.InitialConnectionReceiveWindow, c.MaxConnectionReceiveWindow),
	)
	if c.Framing.HeaderLen <= 0 || c.MaxFrameSize < c.Framing.HeaderLen {
		err = errors.Join(err, fmt.Errorf("MaxFrameSize (%d) must hold a frame header (%d bytes)", c.MaxFrameSize, c.Framing.HeaderLen))
	}
	if err != nil {
		return c, fmt.Errorf("quic: invalid client config: %w", err)
	}
	return c, nil
}

func (c ClientConfig) quicConfig() *quicgo.Config {
	return &quicgo.Config{
		HandshakeIdleTimeout:             c.HandshakeTimeout / 2,
		MaxIdleTimeout:                   c.MaxIdleTimeout,
		KeepAlivePeriod:                  c.KeepAlivePeriod,
		InitialStreamReceiveWindow:       c.InitialStreamReceiveWindow,
		MaxStreamReceiveWindow:           c.MaxStreamReceiveWindow,
		InitialConnectionReceiveWindow:   c.InitialConnectionReceiveWindow,
		MaxConnectionReceiveWindow:       c.MaxConnectionReceiveWindow,
		MaxIncomingStreams:               -1, // the server never opens streams
		MaxIncomingUniStreams:            -1,
		EnableStreamResetPartialDelivery: true,
	}
}

func checkWindows(what string, initial, max uint64) error {
	if initial < minWindow {
		return fmt.Errorf("initial %s receive window %d is below %d bytes", what, initial, minWindow)
	}
	if max < initial {
		return fmt.Errorf("max %s receive window %d is below the initial one (%d)", what, max, initial)
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
