package sdk

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/ledgemq/ledge/transport/quic"
)

// Client defaults.
const (
	// DefaultAddr is the address Dial uses when given an empty one: a node
	// started without configuration listens there.
	DefaultAddr = "127.0.0.1:7420"
	// DefaultDataDir is the data directory a node uses without
	// configuration; a client run beside it finds the CA and the admin
	// token there.
	DefaultDataDir = "ledge-data"
	// DefaultDialTimeout bounds connecting and authenticating.
	DefaultDialTimeout = 10 * time.Second
	// DefaultRequestTimeout bounds one request and its reply.
	DefaultRequestTimeout = 30 * time.Second
)

// Option configures a Client (see Dial).
type Option interface{ apply(*clientConfig) }

type clientOption func(*clientConfig)

func (f clientOption) apply(c *clientConfig) { f(c) }

type clientConfig struct {
	token          string
	tokenFile      string
	caFile         string
	tlsConfig      *tls.Config
	serverName     string
	dataDir        string
	dataDirSet     bool
	dialTimeout    time.Duration
	requestTimeout time.Duration
	logger         *slog.Logger
	transport      *quic.Transport // nil: a socket per connection
}

func defaultClientConfig() clientConfig {
	return clientConfig{
		dataDir:        DefaultDataDir,
		dialTimeout:    DefaultDialTimeout,
		requestTimeout: DefaultRequestTimeout,
		logger:         slog.New(slog.DiscardHandler),
	}
}

// WithToken authenticates with the bearer token secret (what `ledge token
// create` printed, or a node's admin token).
//
// Default: the token of WithTokenFile, else the admin token of the data
// directory (see WithDataDir). An empty secret keeps the default. Dial
// fails with ErrNoCredentials when no token is found anywhere.
func WithToken(secret string) Option {
	return clientOption(func(c *clientConfig) { c.token = secret })
}

// WithTokenFile reads the bearer token from a file (surrounding white
// space is ignored), at Dial.
//
// Default: none. WithToken takes precedence. An unreadable file fails Dial.
func WithTokenFile(path string) Option {
	return clientOption(func(c *clientConfig) { c.tokenFile = path })
}

// WithCAFile trusts the CA certificates in the PEM file (a node's ca.pem)
// and nothing else.
//
// Default: the CA of the data directory (see WithDataDir), else the
// system's roots. WithTLSConfig takes precedence. An unreadable file fails
// Dial.
func WithCAFile(path string) Option {
	return clientOption(func(c *clientConfig) { c.caFile = path })
}

// WithTLSConfig uses cfg for the connection's TLS (client certificates,
// custom verification). The client enforces TLS 1.3 and the ALPN "ledge/1"
// on a copy; cfg is not modified.
//
// Default: built from WithCAFile or the data directory. A nil cfg keeps
// the default.
func WithTLSConfig(cfg *tls.Config) Option {
	return clientOption(func(c *clientConfig) { c.tlsConfig = cfg })
}

// WithServerName verifies the node's certificate against name instead of
// the host of the address dialed (a node reached through an IP address
// its certificate does not list, say).
//
// Default: the host of the address. Ignored when WithTLSConfig sets
// ServerName itself.
func WithServerName(name string) Option {
	return clientOption(func(c *clientConfig) { c.serverName = name })
}

// WithDataDir looks for a node's CA certificate, admin token and listen
// file in its data directory, so a client on the node's machine needs no
// other configuration: Dial given an empty address (and no LEDGE_SERVER)
// dials where the node running on dir listens. Explicit options
// (WithToken, WithTokenFile, WithCAFile, WithTLSConfig) take precedence
// over what is found there.
//
// Default: LEDGE_DATA_DIR, else DefaultDataDir ("ledge-data", relative
// to the working directory) when it exists; a missing default directory
// is not an error. A directory given here must exist, or Dial fails. An
// empty dir turns the lookup off.
func WithDataDir(dir string) Option {
	return clientOption(func(c *clientConfig) { c.dataDir, c.dataDirSet = dir, true })
}

// WithDialTimeout bounds connecting, the TLS handshake and
// authentication, at Dial and at every reconnection, the pauses between
// the attempts a refusing node is given included (see Dial).
//
// Default 10 s. Zero or negative keeps the default. The context given to
// Dial may end it sooner.
func WithDialTimeout(d time.Duration) Option {
	return clientOption(func(c *clientConfig) {
		if d > 0 {
			c.dialTimeout = d
		}
	})
}

// WithRequestTimeout bounds each request from sending it to reading its
// reply: admin requests, commits, and produce batches (a produce request
// without a reply in time is abandoned and resent, which the idempotent
// producer makes safe). A long poll's own wait (WithMaxWait) is added to
// it.
//
// Default 30 s. Zero or negative keeps the default. A context with an
// earlier deadline wins.
func WithRequestTimeout(d time.Duration) Option {
	return clientOption(func(c *clientConfig) {
		if d > 0 {
			c.requestTimeout = d
		}
	})
}

// WithLogger receives the client's events: reconnections, retries,
// producer re-initializations.
//
// Default: discard. A nil logger keeps the default.
func WithLogger(l *slog.Logger) Option {
	return clientOption(func(c *clientConfig) {
		if l != nil {
			c.logger = l
		}
	})
}
