package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ledgemq/ledge/internal/logging"
	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/node/kafka"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/quic"
)

// Config is the effective configuration of `ledge serve`. Load fills every
// field; the zero value is not a valid configuration (use Defaults).
type Config struct {
	// DataDir holds the logs, the metadata, the TLS material and the
	// admin token.
	DataDir string
	// Listen is the UDP address of the QUIC listener.
	Listen string
	// CertNames and CertAddrs are added to the names the server
	// certificate is valid for (localhost, 127.0.0.1, ::1 and the host
	// name always are).
	CertNames, CertAddrs []string
	// ShutdownTimeout bounds how long a graceful stop waits for requests
	// in flight.
	ShutdownTimeout time.Duration
	// RetentionInterval is how often retention runs; 0 turns the
	// background loop off.
	RetentionInterval time.Duration
	// CPUProfile, when set, is the file a CPU profile of the whole run is
	// written to (from start to stop).
	CPUProfile string
	// MemoryLimit is Go's soft memory limit for the node (0: none, or
	// GOMEMLIMIT's when set).
	MemoryLimit int64
	// GCPercent is Go's garbage collection target percent for the node
	// (GOGC's, when GOGC is set and this key is not).
	GCPercent int

	HTTP     HTTP
	Kafka    Kafka
	Log      Log
	Polls    Polls
	Overload Overload
	QUIC     QUIC
	Plugins  Plugins

	// File is the configuration file that was read ("" for none).
	File string

	sources map[string]Source
	origins map[string]string
}

// HTTP configures the operations listener (metrics, health, status page).
type HTTP struct {
	Enabled bool
	Listen  string // TCP host:port
	// Pprof serves Go's profiler under /debug/pprof/.
	Pprof bool
}

// Kafka configures the Kafka protocol listener (docs/KAFKA.md).
type Kafka struct {
	Listen string // TCP host:port; "" for none
	TLS    bool
	// MaxRequestElements bounds a request's topics, partitions and
	// groups, in all.
	MaxRequestElements int
}

// Log configures the node's log.
type Log struct {
	Format string // auto, text or json
	Level  string // debug, info, warn or error
}

// Polls bounds long polls and poll replies.
type Polls struct {
	MaxParked int
	MaxWait   time.Duration
	MaxBytes  int64
}

// Overload bounds the produce requests the node holds before it answers
// busy (node/session's ShedConfig; docs/OPERATIONS.md, "Overload").
type Overload struct {
	MaxRequests int           // 0: no bound
	MaxBytes    int64         // 0: no bound
	DelayTarget time.Duration // 0: never shed on delay
}

// Plugins bounds what plugins may take from the node.
type Plugins struct {
	MemoryBudget int64
	Workers      int // 0: one less than the CPUs, at least 1
	// CallTimeout is the deadline of one plugin call (a filter, a commit
	// policy's proposal, a transform's batch), from when it gets a worker.
	CallTimeout time.Duration
}

// QUIC tunes the QUIC listener.
type QUIC struct {
	MaxConns             int
	MaxUnauthenticated   int
	MaxConnsPerToken     int
	SourceHandshakeRate  int
	SourceHandshakeBurst int
	MaxStreams           int
	MaxRequestsPerStream int
	MaxFrameSize         int64
	InflightBudget       int64
	ReceiveWindowBudget  int64
	IdleTimeout          time.Duration
	KeepAlive            time.Duration
	HandshakeTimeout     time.Duration
	HandshakeWaitTarget  time.Duration
	AuthTimeout          time.Duration
}

// Kind is the type of a key's value.
type Kind uint8

// Kinds of values.
const (
	KindString Kind = iota + 1
	KindAddress
	KindBool
	KindInt
	KindBytes
	KindDuration
	KindChoice
	KindList
)

// Key is one setting: its names, default, unit and allowed values.
type Key struct {
	// Name is the key in the YAML file, dotted for nesting (http.listen).
	Name string
	Kind Kind
	// Default is the default value as the file would spell it.
	Default string
	// Unit says what the value measures (bytes, duration, count), for the
	// documentation table; "" when the kind says it all.
	Unit string
	// Allowed states the accepted values, as errors and docs show them.
	Allowed string
	// Help is the one-line description (flag usage, docs).
	Help string

	set func(c *Config, v rawValue) error // the error completes "want ..."
	get func(c *Config) string            // lists joined by commas
}

// Flag is the key's command-line flag, without dashes: the name with dots
// and underscores turned into dashes (http.listen → http-listen).
func (k Key) Flag() string { return strings.NewReplacer(".", "-", "_", "-").Replace(k.Name) }

// Env is the key's environment variable: LEDGE_ and the name in upper
// case with dots turned into underscores (http.listen → LEDGE_HTTP_LISTEN).
func (k Key) Env() string {
	return "LEDGE_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(k.Name))
}

// rawValue is a value as a source gave it: text, or a YAML sequence.
type rawValue struct {
	text   string
	list   []string
	isList bool
}

func (v rawValue) String() string {
	if v.isList {
		return strings.Join(v.list, ",")
	}
	return v.text
}

// Keys returns every key, in the order of the documentation and of
// --print-config.
func Keys() []Key {
	return []Key{
		stringKey("data_dir", "./"+node.DefaultDataDir, "directory of the logs, metadata, TLS material, admin token and node secret", "a non-empty path",
			func(s string) error {
				if strings.TrimSpace(s) == "" {
					return fmt.Errorf("a non-empty path")
				}
				return nil
			}, func(c *Config) *string { return &c.DataDir }),
		addressKey("listen", node.DefaultListen, "UDP address of the QUIC listener (port 0 picks a free port)", func(c *Config) *string { return &c.Listen }),
		listKey("cert.names", "DNS names the server certificate is valid for, besides localhost and the host name", "DNS names",
			checkDNSName, func(c *Config) *[]string { return &c.CertNames }),
		listKey("cert.addrs", "IP addresses the server certificate is valid for, besides 127.0.0.1 and ::1", "IP addresses",
			checkIP, func(c *Config) *[]string { return &c.CertAddrs }),
		durationKey("shutdown_timeout", 30*time.Second, 100*time.Millisecond, time.Hour, false,
			"how long a graceful stop waits for requests in flight before canceling them", func(c *Config) *time.Duration { return &c.ShutdownTimeout }),
		durationKey("retention_interval", node.DefaultRetentionInterval, time.Second, 24*time.Hour, true,
			"how often retention by age and size runs; 0 turns it off", func(c *Config) *time.Duration { return &c.RetentionInterval }),
		stringKey("cpuprofile", "", "write a CPU profile of the node, from start to stop, to this file (empty: none)", "a file path without control characters, or empty",
			func(s string) error {
				if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
					return fmt.Errorf("a file path without control characters, or empty")
				}
				return nil
			}, func(c *Config) *string { return &c.CPUProfile }),
		bytesKey("memory_limit", 0, 0, 1<<40, "Go's soft memory limit for the node's own memory: past it the garbage collector works harder and gives memory back sooner (plugins' memory is outside it: plugins.memory_budget bounds that); 0: GOMEMLIMIT when set, else 3/4 of the cgroup's or the machine's memory", func(c *Config) *int64 { return &c.MemoryLimit }),
		percentKey("gc_percent", defaultGCPercent, 10, 100000, "Go's garbage collection target (GOGC): collect when the heap has grown this many percent over the live heap; the default, 400, keeps a node holding thousands of connections from stalling in collections, and memory_limit bounds what it costs (docs/OPERATIONS.md, Sizing); GOGC in the environment applies when this is not set", func(c *Config) *int { return &c.GCPercent }),

		boolKey("http.enabled", true, "serve metrics, health checks and the status page over HTTP", func(c *Config) *bool { return &c.HTTP.Enabled }),
		addressKey("http.listen", ops.DefaultHTTPListen, "TCP address of the HTTP listener (/metrics, /healthz, /readyz, /, /api/status)", func(c *Config) *string { return &c.HTTP.Listen }),
		boolKey("http.pprof", false, "also serve Go's profiler under /debug/pprof/ on the HTTP listener (it exposes the node's internals: trusted networks only)", func(c *Config) *bool { return &c.HTTP.Pprof }),

		optionalAddressKey("kafka.listen", "TCP address of the Kafka protocol listener, SASL/PLAIN with a Ledge token as the password (empty: none; docs/KAFKA.md)",
			func(c *Config) *string { return &c.Kafka.Listen }),
		boolKey("kafka.tls", false, "the Kafka listener speaks TLS with the node's certificate (SASL_SSL)", func(c *Config) *bool { return &c.Kafka.TLS }),
		intKey("kafka.max_request_elements", kafka.DefaultMaxRequestElements, 16, 1000000, "topics, partitions and groups of one Kafka request, in all: a Fetch or an OffsetCommit is answered for this many partitions and the client asks again for the rest, any other request past it closes the connection; each costs the node about 1.5 KiB to answer, so past the default a request may take more memory than twice its size and 1 MiB (docs/KAFKA.md, Bounds)", func(c *Config) *int { return &c.Kafka.MaxRequestElements }),

		choiceKey("log.format", string(logging.FormatAuto), logging.Formats(), "log format: text on a terminal and JSON otherwise (auto), or always one of them", func(c *Config) *string { return &c.Log.Format }),
		choiceKey("log.level", "info", logging.Levels(), "least severe level logged", func(c *Config) *string { return &c.Log.Level }),

		intKey("polls.max_parked", 0, 0, 1_000_000, "long polls that may wait for records at once; past it a poll is answered at once (0: one per 16KiB of a sixteenth of the node's memory, from 1024 to 1000000; docs/OPERATIONS.md, Sizing)", func(c *Config) *int { return &c.Polls.MaxParked }),
		durationKey("polls.max_wait", node.DefaultMaxPollWait, time.Millisecond, time.Hour, false, "cap on the wait a long poll asks for", func(c *Config) *time.Duration { return &c.Polls.MaxWait }),
		bytesKey("polls.max_bytes", node.DefaultMaxPollBytes, 64<<10, quic.DefaultMaxReplyFrame/2, "cap on the records of one poll reply (one whole batch per partition is returned regardless)", func(c *Config) *int64 { return &c.Polls.MaxBytes }),

		intKey("overload.max_requests", session.DefaultShedMaxRequests, 0, 1_000_000, "produce requests in flight over all connections (read, not yet answered); past it a produce is answered busy with a retry-after, and nothing happens (0: no bound; docs/OPERATIONS.md, Overload)", func(c *Config) *int { return &c.Overload.MaxRequests }),
		bytesKey("overload.max_bytes", session.DefaultShedMaxBytes, 0, 64<<30, "bytes of those produce requests; past it a produce is answered busy (0: no bound)", func(c *Config) *int64 { return &c.Overload.MaxBytes }),
		durationKey("overload.delay_target", session.DefaultShedDelayTarget, time.Millisecond, time.Minute, true, "queueing delay past which, for 100 ms, the node sheds a growing share of produce requests", func(c *Config) *time.Duration { return &c.Overload.DelayTarget }),

		bytesKey("plugins.memory_budget", 512<<20, 1<<20, 1<<40, "memory of all plugin instances together, growth during calls included; a call that cannot grow within it fails (docs/PLUGINS.md)", func(c *Config) *int64 { return &c.Plugins.MemoryBudget }),
		intKey("plugins.workers", 0, 0, 4096, "plugin code running at once, over all plugins; more calls queue (0: one less than the CPUs, at least 1)", func(c *Config) *int { return &c.Plugins.Workers }),
		durationKey("plugins.call_timeout", plugins.DefaultCallTimeout, 10*time.Millisecond, 10*time.Second, false, "deadline of one plugin call (a filter, a commit policy, a transform's batch), counted from when the call gets a worker, not while it queues; a call past it is cut off and counts a strike against the plugin: raise it for plugins that are heavy on purpose, or on a machine so loaded that honest calls miss it (docs/PLUGINS.md, Limits and failures)", func(c *Config) *time.Duration { return &c.Plugins.CallTimeout }),

		intKey("quic.max_conns", 0, 0, 65536, "authenticated connections served at once; more are refused (0: one per 128KiB of a quarter of the node's memory, from 256 to 65536; docs/OPERATIONS.md, Sizing)", func(c *Config) *int { return &c.QUIC.MaxConns }),
		intKey("quic.max_unauthenticated", quic.DefaultMaxUnauthenticated, 1, 65536, "connections handshaking or waiting to authenticate; one more evicts the oldest of them", func(c *Config) *int { return &c.QUIC.MaxUnauthenticated }),
		intKey("quic.max_conns_per_token", 0, 0, 65536, "authenticated connections of one token; 0: no bound", func(c *Config) *int { return &c.QUIC.MaxConnsPerToken }),
		intKey("quic.source_handshake_rate", quic.DefaultSourceHandshakeRate, 0, 1000000, "handshakes per second from one address that do not end authenticated; 0 turns the limit off", func(c *Config) *int { return &c.QUIC.SourceHandshakeRate }),
		intKey("quic.source_handshake_burst", quic.DefaultSourceHandshakeBurst, 1, 1000000, "handshakes from one address at once, before quic.source_handshake_rate applies", func(c *Config) *int { return &c.QUIC.SourceHandshakeBurst }),
		intKey("quic.max_streams", quic.DefaultMaxIncomingStreams, 1, 65536, "streams one connection may have open at once", func(c *Config) *int { return &c.QUIC.MaxStreams }),
		intKey("quic.max_requests_per_stream", node.DefaultStreamRequests, 1, 65536, "requests in flight on one stream; the node stops reading the stream past it", func(c *Config) *int { return &c.QUIC.MaxRequestsPerStream }),
		bytesKey("quic.max_frame_size", quic.DefaultMaxRequestFrame, 64<<10, 256<<20, "largest request frame, header included; a larger one resets its stream", func(c *Config) *int64 { return &c.QUIC.MaxFrameSize }),
		bytesKey("quic.inflight_budget", quic.DefaultInflightBudget, 64<<10, 64<<30, "bytes of requests read and not yet answered, over all connections; past it the node applies backpressure (at least quic.max_frame_size)", func(c *Config) *int64 { return &c.QUIC.InflightBudget }),
		bytesKey("quic.receive_window_budget", quic.DefaultReceiveWindowBudget, 1<<20, 64<<30, "growth of receive windows beyond their initial 256KiB, all connections together: what QUIC may buffer for the node past that", func(c *Config) *int64 { return &c.QUIC.ReceiveWindowBudget }),
		durationKey("quic.idle_timeout", quic.DefaultMaxIdleTimeout, time.Second, time.Hour, false, "a connection without a packet for this long is closed", func(c *Config) *time.Duration { return &c.QUIC.IdleTimeout }),
		durationKey("quic.keep_alive", 0, time.Second, time.Hour, true, "how often the node sends keep-alives on quiet connections; 0 leaves it to clients", func(c *Config) *time.Duration { return &c.QUIC.KeepAlive }),
		durationKey("quic.handshake_timeout", quic.DefaultHandshakeTimeout, time.Second, 5*time.Minute, false, "bound on the QUIC and TLS handshake", func(c *Config) *time.Duration { return &c.QUIC.HandshakeTimeout }),
		durationKey("quic.handshake_wait_target", quic.DefaultHandshakeWaitTarget, time.Millisecond, time.Minute, true, "while every handshake the node took up over 100 ms had waited longer than this for it, new connections are refused before any TLS work, to be dialled again after a pause; 0 turns the refusals off", func(c *Config) *time.Duration { return &c.QUIC.HandshakeWaitTarget }),
		durationKey("quic.auth_timeout", quic.DefaultAuthTimeout, time.Second, 5*time.Minute, false, "bound on the wait for a connection's authentication request", func(c *Config) *time.Duration { return &c.QUIC.AuthTimeout }),
	}
}

// KeyByName returns the key called name.
func KeyByName(name string) (Key, bool) {
	for _, k := range Keys() {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

func stringKey(name, def, help, allowed string, check func(string) error, field func(*Config) *string) Key {
	return Key{
		Name: name, Kind: KindString, Default: def, Allowed: allowed, Help: help,
		set: func(c *Config, v rawValue) error {
			if v.isList {
				return fmt.Errorf("%s, not a list", allowed)
			}
			if err := check(v.text); err != nil {
				return err
			}
			*field(c) = v.text
			return nil
		},
		get: func(c *Config) string { return *field(c) },
	}
}

func addressKey(name, def, help string, field func(*Config) *string) Key {
	k := stringKey(name, def, help, "host:port", checkHostPort, field)
	k.Kind, k.Unit = KindAddress, "host:port"
	return k
}

// optionalAddressKey is addressKey whose empty value, the default, turns
// its listener off.
func optionalAddressKey(name, help string, field func(*Config) *string) Key {
	k := stringKey(name, "", help, "host:port, or empty", func(s string) error {
		if s == "" {
			return nil
		}
		return checkHostPort(s)
	}, field)
	k.Kind, k.Unit = KindAddress, "host:port"
	return k
}

func choiceKey(name, def string, choices []string, help string, field func(*Config) *string) Key {
	allowed := "one of " + strings.Join(choices, ", ")
	k := stringKey(name, def, help, allowed, func(s string) error {
		if !slices.Contains(choices, strings.ToLower(s)) {
			return fmt.Errorf("%s", allowed)
		}
		return nil
	}, field)
	set := k.set
	k.set = func(c *Config, v rawValue) error {
		v.text = strings.ToLower(strings.TrimSpace(v.text))
		return set(c, v)
	}
	k.Kind = KindChoice
	return k
}

func boolKey(name string, def bool, help string, field func(*Config) *bool) Key {
	return Key{
		Name: name, Kind: KindBool, Default: strconv.FormatBool(def), Allowed: "true or false", Help: help,
		set: func(c *Config, v rawValue) error {
			b, err := parseBool(v.text)
			if err != nil || v.isList {
				return fmt.Errorf("true or false")
			}
			*field(c) = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) },
	}
}

func intKey(name string, def, lo, hi int, help string, field func(*Config) *int) Key {
	allowed := fmt.Sprintf("%d to %d", lo, hi)
	return Key{
		Name: name, Kind: KindInt, Default: strconv.Itoa(def), Unit: "count", Allowed: allowed, Help: help,
		set: func(c *Config, v rawValue) error {
			n, err := strconv.Atoi(strings.TrimSpace(v.text))
			if err != nil || v.isList || n < lo || n > hi {
				return fmt.Errorf("an integer from %s", allowed)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(*field(c)) },
	}
}

// percentKey is an intKey in percent.
func percentKey(name string, def, lo, hi int, help string, field func(*Config) *int) Key {
	k := intKey(name, def, lo, hi, help, field)
	k.Unit = "percent"
	return k
}

func bytesKey(name string, def, lo, hi int64, help string, field func(*Config) *int64) Key {
	allowed := fmt.Sprintf("%s to %s", formatBytes(lo), formatBytes(hi))
	return Key{
		Name: name, Kind: KindBytes, Default: formatBytes(def), Unit: "bytes", Allowed: allowed, Help: help,
		set: func(c *Config, v rawValue) error {
			n, err := parseBytes(v.text)
			if err != nil || v.isList {
				return fmt.Errorf("a size in bytes from %s (units: KiB, MiB, GiB)", allowed)
			}
			if n < lo || n > hi {
				return fmt.Errorf("a size from %s", allowed)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return formatBytes(*field(c)) },
	}
}

// durationKey is a duration in [lo, hi]; zeroOff also accepts 0 (off).
func durationKey(name string, def, lo, hi time.Duration, zeroOff bool, help string, field func(*Config) *time.Duration) Key {
	allowed := fmt.Sprintf("%s to %s", formatDuration(lo), formatDuration(hi))
	if zeroOff {
		allowed = "0 (off) or " + allowed
	}
	return Key{
		Name: name, Kind: KindDuration, Default: formatDuration(def), Unit: "duration", Allowed: allowed, Help: help,
		set: func(c *Config, v rawValue) error {
			d, err := parseDuration(v.text)
			if err != nil || v.isList {
				return fmt.Errorf("a duration such as 500ms, 30s or 5m, %s", allowed)
			}
			if !(zeroOff && d == 0) && (d < lo || d > hi) {
				return fmt.Errorf("a duration from %s", allowed)
			}
			*field(c) = d
			return nil
		},
		get: func(c *Config) string { return formatDuration(*field(c)) },
	}
}

func listKey(name, help, allowed string, check func(string) error, field func(*Config) *[]string) Key {
	return Key{
		Name: name, Kind: KindList, Default: "", Unit: "list", Allowed: allowed, Help: help,
		set: func(c *Config, v rawValue) error {
			items := v.list
			if !v.isList {
				items = splitList(v.text)
			}
			for _, it := range items {
				if err := check(it); err != nil {
					return fmt.Errorf("%w; %q is not one", err, it)
				}
			}
			*field(c) = slices.Clone(items)
			return nil
		},
		get: func(c *Config) string { return strings.Join(*field(c), ",") },
	}
}
