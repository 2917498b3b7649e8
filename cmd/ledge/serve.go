package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/ledgemq/ledge/internal/config"
	"github.com/ledgemq/ledge/internal/datadir"
	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

func newServeCommand() *cobra.Command {
	var loader *config.Loader
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Ledge node",
		Long: `Run a Ledge node: open the data directory, serve its topics over QUIC, and
stop gracefully on SIGINT or SIGTERM (a second signal exits at once).

On first start the data directory is created with a certificate authority
and a server certificate (in tls/) and an admin token (admin.token). While
it runs, the node records where it listens (QUIC, HTTP, Kafka) in
listen.json there, and removes it when it stops. The CLI run in the
directory that holds ./ledge-data, or given the data directory (--data-dir
or LEDGE_DATA_DIR), finds the node through them without other flags,
whatever its ports; elsewhere pass --server, --ca and --token-file (or
LEDGE_SERVER, LEDGE_CA and LEDGE_TOKEN_FILE), which keeps the token out of
the command line.

Metrics (/metrics), health checks (/healthz, /readyz) and a status page
(/) are served over HTTP on --http-listen (default 127.0.0.1:7421).

Every setting is a flag, a LEDGE_* environment variable and a key of the
YAML file given with --config, in that order of precedence; --print-config
shows the effective configuration. docs/OPERATIONS.md lists them all.`,
		Example: `  ledge serve
  ledge serve --data-dir /var/lib/ledge --listen 0.0.0.0:7420 \
      --cert-names ledge.example.net --cert-addrs 192.168.1.10
  ledge serve --config /etc/ledge/ledge.yaml --print-config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loader.Load(os.LookupEnv)
			if err != nil {
				return err
			}
			if loader.PrintRequested() {
				return cfg.Print(cmd.OutOrStdout())
			}
			return runServe(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg)
		},
	}
	loader = config.Register(cmd.Flags())
	return cmd
}

func runServe(ctx context.Context, stdout, stderr io.Writer, cfg *config.Config) error {
	if ctx == nil {
		ctx = context.Background()
	}
	logger := cfg.Logger(stderr)
	ver, _ := buildVersion()

	// Signals are caught before the node opens, so that one arriving
	// during start-up still stops it gracefully.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
		logger.Info("writing a CPU profile until the node stops", "file", cfg.CPUProfile)
	}

	// The collector is set before the node holds anything: its percent
	// and its soft limit (plugins' memory is outside the Go heap, under
	// plugins.memory_budget).
	gc := cfg.GC()
	if gc.Percent >= 0 {
		debug.SetGCPercent(gc.Percent)
	}
	if gc.Limit > 0 {
		debug.SetMemoryLimit(gc.Limit)
	}
	logger.Info("garbage collector", gc.LogAttrs()...)
	ncfg := cfg.Node()
	ncfg.Logger, ncfg.Version = logger, ver
	var err error
	if ncfg.FS, err = testDisk(ctx, cfg.DataDir, logger); err != nil {
		return err
	}
	// GOMAXPROCS stays at the CPUs: raising it by the plugin workers cost
	// every node a quarter of its produce throughput, and beside hostile
	// plugins it did worse, not better, on a quiet machine
	// (plugins/RATIONALE.md, Processors for the workers).
	// The HTTP listener starts first: /healthz answers and /readyz says
	// "recovery pending" while a large data directory is recovered.
	var httpSrv *ops.HTTPServer
	if cfg.HTTP.Enabled {
		httpSrv, err = ops.StartHTTP(ops.HTTPConfig{Listen: cfg.HTTP.Listen, Logger: logger, Version: ver, Pprof: cfg.HTTP.Pprof})
		if err != nil {
			return err
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = httpSrv.Close(ctx)
		}()
		ncfg.Metrics = httpSrv.Metrics()
		ncfg.FS = httpSrv.Metrics().WrapFS(ncfg.FS, logger)
	}
	// What the node starts lives on the context it opens with (uplinks):
	// a stop signal during the start-up cancels it, nothing else does
	// before the node is closed.
	openCtx, cancelOpen := context.WithCancel(ctx)
	defer cancelOpen()
	n, stopSignal, err := openNode(openCtx, cancelOpen, ncfg, sigs)
	if err != nil {
		if stopSignal != nil {
			logger.Info("stopped during start-up", "signal", stopSignal.String(), "err", err)
			return nil
		}
		return err
	}
	if stopSignal != nil {
		// The signal came as the node finished opening: it stops now.
		go func() { sigs <- stopSignal }()
	}
	if httpSrv != nil {
		httpSrv.Attach(n)
		httpSrv.AttachGroups(n.Groups())
		httpSrv.AttachPlugins(n.Plugins())
	}
	// Where the node listens goes into its data directory before the
	// banner says how to reach it: the CLI, ledge status and the SDK run
	// beside the data directory read it there.
	listen := datadir.Listen{PID: os.Getpid(), QUIC: datadir.DialAddr(n.Addr()), Kafka: n.KafkaAddr(), Version: ver, Started: time.Now().UTC()}
	if listen.Kafka != "" {
		listen.Kafka = datadir.DialAddr(listen.Kafka)
	}
	if httpSrv != nil {
		listen.HTTP = datadir.DialAddr(httpSrv.Addr())
	}
	if err := datadir.WriteListen(cfg.DataDir, listen); err != nil {
		logger.Warn("clients beside the data directory will not find the node", "err", err)
	}
	// Removed once the node is closed; a node killed before that leaves
	// a file its readers see is stale (datadir.Live).
	defer removeListen(cfg.DataDir, logger)
	printWelcome(stdout, n, ver)
	if a := n.KafkaAddr(); a != "" {
		fmt.Fprintf(stdout, "Kafka listener: %s (SASL/PLAIN; the password is a Ledge token)\n", a)
	}
	if httpSrv != nil {
		fmt.Fprintf(stdout, "Status page: http://%s/ (ledge status prints it here)\n", httpSrv.Addr())
	}

	select {
	case s := <-sigs:
		logger.Info("stopping", "signal", s.String(), "timeout", cfg.ShutdownTimeout.String())
	case <-ctx.Done():
		logger.Info("stopping", "reason", context.Cause(ctx))
	}
	if httpSrv != nil {
		httpSrv.Stopping() // not ready from now on
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Close(stopCtx) }()
	select {
	case err := <-done:
		return err
	case s := <-sigs:
		select {
		case err := <-done: // finished meanwhile
			return err
		default:
		}
		fmt.Fprintf(stderr, "ledge: second %s: exiting at once\n", s)
		removeListen(cfg.DataDir, logger)
		if cfg.CPUProfile != "" {
			pprof.StopCPUProfile() // what was profiled so far is kept
		}
		os.Exit(1)
	}
	return nil
}

// removeListen removes the listen file of a stopping node.
func removeListen(dataDir string, logger *slog.Logger) {
	if err := datadir.RemoveListen(dataDir); err != nil {
		logger.Warn("the listen file stays: clients see it is stale", "err", err)
	}
}

// startCPUProfile writes a CPU profile to path until the returned
// function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func printWelcome(w io.Writer, n *node.Node, ver string) {
	p := n.Paths()
	abs := func(path string) string {
		if a, err := filepath.Abs(path); err == nil {
			return a
		}
		return path
	}
	token := "(kept from an earlier start)"
	if n.MintedAdminToken() {
		token = "(created now: keep it secret)"
	}
	dataDir := abs(p.DataDir)
	fmt.Fprintf(w, "ledge %s listening on %s (QUIC)\n", ver, n.Addr())
	fmt.Fprintf(w, "  data directory   %s\n", dataDir)
	fmt.Fprintf(w, "  CA certificate   %s (clients trust this file)\n", abs(p.CA))
	fmt.Fprintf(w, "  server cert      %s\n", abs(p.Cert))
	fmt.Fprintf(w, "  admin token      %s %s\n", abs(p.AdminToken), token)
	// The CLI finds the node's address, CA and token through the data
	// directory (its listen file): ./ledge-data from its parent, else the
	// one LEDGE_DATA_DIR names.
	if filepath.Base(dataDir) == sdk.DefaultDataDir {
		fmt.Fprintf(w, "\nFrom another terminal in %s:\n", shellQuote(filepath.Dir(dataDir)))
	} else {
		fmt.Fprintf(w, "\nFrom another terminal:\n")
		fmt.Fprintf(w, "  export %s=%s\n", envDataDir, shellQuote(dataDir))
	}
	fmt.Fprintf(w, "  ledge topic create demo\n")
	fmt.Fprintf(w, "  echo hello | ledge produce demo\n")
	fmt.Fprintf(w, "  ledge consume demo --from earliest\n")
	fmt.Fprintf(w, "From anywhere else:\n")
	// --token-file, not --token "$(cat ...)": a secret in argv is in every
	// process listing.
	fmt.Fprintf(w, "  ledge --server %s --ca %s --token-file %s topic list\n", datadir.DialAddr(n.Addr()), shellQuote(abs(p.CA)), shellQuote(abs(p.AdminToken)))
	fmt.Fprintf(w, "  (or set LEDGE_SERVER, LEDGE_CA and LEDGE_TOKEN_FILE)\n")
	fmt.Fprintf(w, "Press Ctrl-C to stop.\n")
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and / . _ - + , : @ %.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// openNode opens the node on ctx, canceling it (cancel) when a stop
// signal arrives meanwhile: a recovery, or a metadata store waiting for
// room on a full disk, can take long. The signal is returned with Open's
// error, or alone if Open finished first.
func openNode(ctx context.Context, cancel context.CancelFunc, cfg node.Config, sigs <-chan os.Signal) (*node.Node, os.Signal, error) {
	opened := make(chan struct{})
	caught := make(chan os.Signal, 1)
	go func() {
		defer close(caught)
		select {
		case s := <-sigs:
			caught <- s
			cancel()
		case <-opened:
		}
	}()
	n, err := node.Open(ctx, cfg)
	close(opened)
	return n, <-caught, err
}
