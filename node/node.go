package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/internal/datadir"
	"github.com/ledgemq/ledge/node/downlink"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/kafka"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/node/transform"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/quic/certs"
	"github.com/ledgemq/ledge/transport/wire"
)

// Defaults of Config.
const (
	DefaultDataDir           = "ledge-data"
	DefaultListen            = "127.0.0.1:7420"
	DefaultRetentionInterval = time.Minute
	DefaultMaxParkedPolls    = 1024
	DefaultMaxPollWait       = 5 * time.Minute
	DefaultMaxPollBytes      = 8 << 20
	DefaultPollBytes         = 1 << 20
	DefaultStreamRequests    = 256
)

// Config configures a Node. The zero value of every field picks the
// documented default.
type Config struct {
	// DataDir holds the storage engine's files, the TLS material and the
	// admin token (named in package datadir) and the node secret
	// (SecretFile).
	// Default "ledge-data"; created (0700) when missing.
	DataDir string
	// Listen is the UDP address of the QUIC listener. Default
	// 127.0.0.1:7420; port 0 picks a free port (see Node.Addr).
	Listen string
	// CertNames are the DNS names and IP addresses the server certificate
	// is valid for. Default: localhost, 127.0.0.1, ::1 and the host name.
	CertNames []string
	// Now is the clock of token expiry, retention and certificates.
	// Default time.Now.
	Now func() time.Time
	// Logger receives one line per significant event. Default: discard.
	Logger *slog.Logger
	// Version is the software version Authenticate replies carry.
	Version string

	// Storage, when set, replaces the storage engine (an in-memory model
	// in tests and simulations); the node closes it. FS is the file system
	// of the engine when Storage is nil. Default vfs.Default.
	Storage Storage
	FS      vfs.FS

	// Transport tunes the QUIC listener (see quic.Config); the node sets
	// its Authenticate and, when nil, its Logger and its StatelessResetKey
	// (derived from SecretFile in the data directory).
	Transport quic.Config

	// RetentionInterval is how often every partition's retention is
	// enforced. Default 1 minute; negative disables the background loop
	// (EnforceRetention still works).
	RetentionInterval time.Duration
	// MaxParkedPolls bounds the long polls waiting for records at once.
	// A poll past it is answered at once, with StatusBusy when it found
	// nothing. Default 1024.
	MaxParkedPolls int
	// MaxPollWait caps a poll's MaxWait. Default 5 minutes.
	MaxPollWait time.Duration
	// MaxPollBytes caps the records of one poll reply (at least one whole
	// batch per partition is returned regardless). Default 8 MiB; a poll
	// that asks for no limit gets 1 MiB.
	MaxPollBytes int
	// Shed bounds the produce requests the node holds (in flight, their
	// bytes) and sets its shedding on queueing delay: past them a produce
	// is answered busy with a retry-after (session.ShedConfig; its zero
	// value takes the defaults; docs/OPERATIONS.md, "Overload").
	Shed session.ShedConfig
	// MaxStreamRequests bounds the requests in flight on one stream; the
	// node stops reading a stream past it. Default 256.
	MaxStreamRequests int

	// Metrics receives the request path's counters (see Metrics). Default
	// nil: nothing is counted.
	Metrics Metrics

	// KafkaListen, when set, is the TCP address of the Kafka protocol
	// listener (package kafka, docs/KAFKA.md); KafkaTLS makes it speak
	// TLS with the node's certificate. Default: no Kafka listener.
	KafkaListen string
	KafkaTLS    bool
	// KafkaMaxRequestElements bounds the topics, partitions and groups
	// of one Kafka request (kafka.Config.MaxRequestElements). Default
	// kafka.DefaultMaxRequestElements.
	KafkaMaxRequestElements int

	// Plugins configures the WebAssembly plugin host (limits, budget).
	// Its zero value takes the host's defaults; CacheDir defaults to
	// PluginsCacheDir in the data directory when FS is the disk's
	// (vfs.Default, or a wrapper of it with an Unwrap method), and Logger
	// to the node's.
	Plugins plugins.Config
}

func (c Config) withDefaults() Config {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Transport.Logger == nil {
		c.Transport.Logger = c.Logger
	}
	if c.Transport.MaxFrameSize == 0 {
		c.Transport.MaxFrameSize = quic.DefaultMaxRequestFrame
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = DefaultRetentionInterval
	}
	if c.MaxParkedPolls <= 0 {
		c.MaxParkedPolls = DefaultMaxParkedPolls
	}
	if c.MaxPollWait <= 0 {
		c.MaxPollWait = DefaultMaxPollWait
	}
	if c.MaxPollBytes <= 0 {
		c.MaxPollBytes = DefaultMaxPollBytes
	}
	if c.MaxStreamRequests <= 0 {
		c.MaxStreamRequests = DefaultStreamRequests
	}
	return c
}

// shedConfig is the node's shedder configuration, reporting to the node's
// metrics when they take its figures.
func shedConfig(cfg Config) session.ShedConfig {
	c := cfg.Shed
	if m, ok := cfg.Metrics.(session.ShedMetrics); ok && c.Metrics == nil {
		c.Metrics = m
	}
	return c
}

// Paths are where a node keeps the files a client needs.
type Paths struct {
	DataDir string
	// CA is the certificate clients trust (ca.pem).
	CA string
	// Cert is the server certificate (server.pem).
	Cert string
	// AdminToken is the file holding the admin token minted at first start.
	AdminToken string
}

// Node is a running Ledge node: storage, one owner per partition, tokens,
// TLS material and the QUIC listener that serves them.
type Node struct {
	cfg       Config
	log       *slog.Logger
	paths     Paths
	storage   Storage
	meta      owner.Metadata
	producers *owner.Producers
	sessions  *owner.Sessions
	tokens    *tokens.Registry
	plugins   *pluginreg.Registry
	groups    *group.Groups
	uplinks   *uplink.Manager
	downlinks *downlink.Manager
	// transforms run as members of internal groups (node/transform).
	transforms *transform.Manager
	certs      *certs.Store
	ln         *quic.Listener
	kafka      *kafka.Server
	// mintedAdmin says the admin token was minted by this start.
	mintedAdmin bool

	// base ends every request (hard stop); drain ends parked polls when a
	// graceful shutdown begins.
	base        context.Context
	cancelBase  context.CancelFunc
	drain       context.Context
	cancelDrain context.CancelFunc
	parked      chan struct{} // one token per parked poll
	shed        *session.Shedder

	adminMu  sync.Mutex // serializes topic creation and deletion
	topicsMu sync.RWMutex
	topics   map[string]*topic

	// onPark, when set before the first connection, is called when a long
	// poll takes a parked-poll slot (tests observe parking with it).
	onPark func()

	work      sync.WaitGroup // the accept loop, connections, streams and handlers
	loops     sync.WaitGroup // background loops
	closing   atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Open opens the storage under cfg.DataDir, creates an owner for every
// partition, loads the tokens (minting an admin token on first start),
// loads or creates the TLS material and starts the QUIC listener.
//
// A failure is one error naming its cause (the data directory held by
// another process, with its pid when the lock tells it; a port in use; a
// read-only directory), and whatever Open had opened is closed again.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("node: create data directory: %w", err)
	}
	n := &Node{
		cfg:    cfg,
		log:    cfg.Logger,
		topics: map[string]*topic{},
		parked: make(chan struct{}, cfg.MaxParkedPolls),
		shed:   session.NewShedder(shedConfig(cfg)),
		paths: Paths{
			DataDir:    cfg.DataDir,
			CA:         filepath.Join(cfg.DataDir, datadir.TLSDir, certs.CAFile),
			Cert:       filepath.Join(cfg.DataDir, datadir.TLSDir, certs.CertFile),
			AdminToken: filepath.Join(cfg.DataDir, datadir.AdminTokenFile),
		},
	}
	n.base, n.cancelBase = context.WithCancel(context.Background())
	n.drain, n.cancelDrain = context.WithCancel(n.base)
	if err := n.open(ctx); err != nil {
		n.abandon()
		return nil, err
	}
	return n, nil
}

// open does Open's work on n; on an error, abandon closes what it opened.
func (n *Node) open(ctx context.Context) error {
	cfg := n.cfg
	if n.storage = cfg.Storage; n.storage == nil {
		var err error
		if n.storage, err = openEngine(ctx, cfg); err != nil {
			return dataDirError(cfg, err)
		}
	}
	n.meta = n.storage.Metadata()
	var err error
	if n.producers, err = owner.OpenProducers(n.meta); err != nil {
		return fmt.Errorf("node: producer registry: %w", err)
	}
	// Sessions are per consumer name, node-wide: a named consumer is one
	// process, whatever topics it reads (docs/FENCING.md).
	if n.sessions, err = owner.OpenSessions(n.meta); err != nil {
		return fmt.Errorf("node: consumer sessions: %w", err)
	}
	// The group coordinator exists before the owners: each owner asks it
	// who holds its partition.
	if n.groups, err = group.OpenGroups(group.GroupsConfig{Meta: n.meta, Topics: n.groupTopics(), Now: cfg.Now, Logger: cfg.Logger}); err != nil {
		return fmt.Errorf("node: consumer groups: %w", err)
	}
	stored, err := n.storage.Topics()
	if err != nil {
		return fmt.Errorf("node: listing topics: %w", err)
	}
	for _, st := range stored {
		t, err := n.newTopic(st)
		if err != nil {
			return err
		}
		n.topics[t.Name] = t
	}
	if n.tokens, err = tokens.Open(n.meta, cfg.Now); err != nil {
		return err
	}
	if n.plugins, err = pluginreg.Open(pluginreg.Config{Plugins: cfg.Plugins, FS: cfg.FS, DataDir: cfg.DataDir, Logger: cfg.Logger, Now: cfg.Now}, n.meta); err != nil {
		return err
	}
	if err := n.bootstrapAdminToken(ctx); err != nil {
		return err
	}
	nodeID, err := LoadOrCreateNodeID(ctx, n.meta)
	if err != nil {
		return err
	}
	n.uplinks = uplink.NewManager(uplink.ManagerConfig{NodeID: nodeID, Meta: n.meta, Partitions: n.uplinkPartitions,
		Template: uplink.Config{Logger: n.log, Now: cfg.Now}})
	if err := n.uplinks.Start(ctx); err != nil {
		return err
	}
	n.downlinks = downlink.NewManager(downlink.ManagerConfig{Meta: n.meta, Producers: n.producers,
		Partitions: n.downlinkPartitions, Template: downlink.Config{Logger: n.log, Now: cfg.Now}})
	if err := n.downlinks.Start(ctx); err != nil {
		return err
	}
	reg := transform.Registry(n.plugins)
	n.transforms = transform.NewManager(transform.ManagerConfig{Meta: n.meta, Groups: n.groups, Producers: n.producers,
		Plugin: reg, Check: reg.Check, Topics: n.transformTopic, Now: cfg.Now, Logger: n.log})
	if err := n.transforms.Start(ctx); err != nil {
		return err
	}
	if pm, ok := cfg.Metrics.(*ops.PromMetrics); ok {
		if err := transform.RegisterMetrics(pm.Registry(), n.transforms); err != nil {
			return err
		}
	}
	n.certs, err = certs.Open(certs.Options{
		Dir: filepath.Join(cfg.DataDir, datadir.TLSDir), Names: cfg.CertNames, Now: cfg.Now, Logger: cfg.Logger,
	})
	if err != nil {
		return err
	}
	// Counted before the listener starts: requests may change the topics
	// from then on.
	topics := len(n.topics)
	qcfg := cfg.Transport
	qcfg.Authenticate = n.authenticate
	if qcfg.StatelessResetKey == nil {
		if qcfg.StatelessResetKey, err = loadResetKey(cfg.DataDir); err != nil {
			return err
		}
	}
	n.ln, err = quic.Listen(cfg.Listen, quic.ServerTLSConfig(n.certs.GetCertificate), qcfg)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("node: QUIC address %s is already in use (another ledge serve?)", cfg.Listen)
		}
		return err
	}
	if cfg.KafkaListen != "" {
		if err := n.listenKafka(); err != nil {
			_ = n.ln.Close()
			return err
		}
	}
	n.work.Go(n.acceptLoop)
	// The shedder may also see the wait ahead of the node's goroutines,
	// in the listener's UDP socket (docs/OPERATIONS.md, "Overload").
	var waits []session.DelaySource
	if cfg.Shed.SocketWait {
		waits = append(waits, session.DelaySource{Name: "socket", Measure: n.ln.ReceiveQueueDelay})
	}
	n.loops.Go(func() { n.shed.Run(n.drain, waits...) })
	n.plugins.StartLoading(n.drain) // serving meanwhile: node/pluginreg
	if cfg.RetentionInterval > 0 {
		n.loops.Go(n.retentionLoop)
	}
	n.loops.Go(func() { n.groups.Run(n.drain, time.Second) })
	n.loops.Go(n.peersLoop) // peers.go: a killed predecessor's clients are reset
	n.logRecovered()
	n.log.Info("node started", "listen", n.ln.Addr().String(), "data", cfg.DataDir, "topics", topics)
	return nil
}

// abandon closes what a failed open had opened, in the reverse order.
func (n *Node) abandon() {
	n.cancelBase()
	if n.uplinks != nil {
		n.uplinks.Close()
	}
	if n.downlinks != nil {
		n.downlinks.Close()
	}
	if n.transforms != nil {
		n.transforms.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, t := range n.topics {
		for _, o := range t.Owners {
			_ = o.Close(ctx)
		}
	}
	n.plugins.Close(ctx)
	if err := n.closeStorage(); err != nil {
		n.log.Warn("closing the storage after a failed start", "err", err)
	}
}

// Addr returns the address the node listens on.
func (n *Node) Addr() string { return n.ln.Addr().String() }

// Paths returns where the node keeps the files a client needs.
func (n *Node) Paths() Paths { return n.paths }

// MintedAdminToken reports whether this start minted the admin token (the
// data directory had none).
func (n *Node) MintedAdminToken() bool { return n.mintedAdmin }

// Stats returns the listener's counters.
func (n *Node) Stats() quic.Stats { return n.ln.Stats() }

// Close shuts the node down gracefully: it stops accepting connections and
// streams, answers parked polls at once, lets the requests already read be
// answered (their effects durable per policy), then closes every partition
// owner (Owner.Close) and the storage. When ctx ends first, requests still running are canceled
// (clients see their connection close: those requests may or may not have
// taken effect, and idempotent retries are safe) and the storage is still
// closed cleanly.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() { n.closeErr = n.close(ctx) })
	return n.closeErr
}

func (n *Node) close(ctx context.Context) error {
	n.closing.Store(true)
	n.cancelDrain()
	var errs []error
	if err := n.ln.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		errs = append(errs, err)
	}
	if n.kafka != nil {
		_ = n.kafka.Close()
	}
	done := make(chan struct{})
	go func() { n.work.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		n.log.Warn("shutdown deadline passed; canceling requests in flight")
	}
	n.cancelBase()
	<-done
	n.loops.Wait()
	n.forgetPeers()
	n.uplinks.Close()
	n.downlinks.Close()
	n.transforms.Close()
	// Every request is answered: the owners take their last step, so
	// nothing more reaches the storage through them.
	for _, t := range n.topicList() {
		for _, o := range t.Owners {
			if err := o.Close(ctx); err != nil && ctx.Err() == nil {
				errs = append(errs, err)
			}
		}
	}
	if err := n.plugins.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := n.closeStorage(); err != nil {
		errs = append(errs, err)
	}
	n.log.Info("node stopped")
	return errors.Join(errs...)
}

func (n *Node) closeStorage() error {
	if n.storage == nil {
		return nil
	}
	err := n.storage.Close()
	n.storage = nil
	if err != nil {
		return fmt.Errorf("node: closing storage: %w", err)
	}
	return nil
}

// retentionLoop enforces every partition's retention on a ticker.
func (n *Node) retentionLoop() {
	tick := time.NewTicker(n.cfg.RetentionInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.drain.Done():
			return
		case <-tick.C:
			n.EnforceRetention()
		}
	}
}

// EnforceRetention applies every partition's retention at Config.Now,
// through its owner. Failures are logged; they do not stop the others.
// When an uplink's floor starts or stops holding retention back, a line
// says so (Owner.RetentionHold counts every enforcement held back).
func (n *Node) EnforceRetention() {
	now := n.cfg.Now()
	for _, t := range n.topicList() {
		for _, o := range t.Owners {
			was := o.RetentionHold().Held
			res, err := o.EnforceRetention(now)
			switch {
			case err != nil:
				if !t.Deleted() {
					n.log.Warn("retention failed", "topic", t.Name, "partition", o.Index(), "err", err)
				}
			case res.HeldBack() && !was:
				n.log.Warn("retention held back: records the uplink has not forwarded are kept (overflow block)",
					"topic", t.Name, "partition", o.Index(), "floor", res.Floor, "start", res.LogStart,
					"retention_start", res.Wanted, "held_bytes", res.HeldBytes)
			case !res.HeldBack() && was:
				n.log.Info("retention no longer held back by the uplink", "topic", t.Name, "partition", o.Index(), "start", res.LogStart)
			}
		}
	}
}

// retentionFloor is the floor retention keeps on a partition: the
// uplink's, under the block overflow policy.
func (n *Node) retentionFloor(id fence.TopicID, partition uint32) (uint64, bool) {
	if n.uplinks == nil {
		return 0, false
	}
	return n.uplinks.RetentionFloor(id, partition)
}

// bootstrapAdminToken mints an admin token on every topic when the data
// directory has no admin token file, and writes its secret there (0600).
// The token is durable before the file exists, so a crash in between
// leaves a token nobody knows (revocable) rather than a file the node does
// not accept; the next start mints another.
func (n *Node) bootstrapAdminToken(ctx context.Context) error {
	if b, err := os.ReadFile(n.paths.AdminToken); err == nil {
		if _, err := n.tokens.Authenticate(strings.TrimSpace(string(b))); err != nil {
			n.log.Warn("the admin token file holds a token this node does not accept; remove the file to mint a new one at the next start",
				"file", n.paths.AdminToken, "reason", err)
		}
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("node: admin token file: %w", err)
	}
	_, secret, err := n.tokens.Create(ctx, "admin", wire.AllTopics, wire.ScopeProduce|wire.ScopeConsume|wire.ScopeAdmin, 0)
	if err != nil {
		return fmt.Errorf("node: minting the admin token: %w", err)
	}
	if err := writeFileAtomic(n.paths.AdminToken, []byte(secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("node: writing the admin token: %w", err)
	}
	n.mintedAdmin = true
	n.log.Info("admin token created", "file", n.paths.AdminToken)
	return nil
}

// writeFileAtomic replaces path with data: temporary file, fsync, rename,
// fsync of the directory.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(perm); err == nil {
		if _, err = f.Write(data); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
