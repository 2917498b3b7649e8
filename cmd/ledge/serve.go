package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/transport/quic/certs"
	"github.com/spf13/cobra"
)

type serveOptions struct {
	dataDir         string
	listen          string
	certNames       []string
	certAddrs       []string
	shutdownTimeout time.Duration
}

func newServeCommand() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Ledge node",
		Long: `Run a Ledge node: open the data directory, serve its topics over QUIC, and
stop gracefully on SIGINT or SIGTERM (a second signal exits at once).

On first start the data directory is created with a certificate authority
and a server certificate (in tls/) and an admin token (admin.token). The
CLI run in the directory that holds the data directory finds them without
flags; elsewhere pass --server, --ca and --token (or LEDGE_SERVER,
LEDGE_CA and LEDGE_TOKEN).`,
		Example: `  ledge serve
  ledge serve --data-dir /var/lib/ledge --listen 0.0.0.0:7420 \
      --cert-names ledge.example.net --cert-addrs 192.168.1.10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "./"+node.DefaultDataDir, "directory of the node's data, TLS material and admin token")
	f.StringVar(&o.listen, "listen", node.DefaultListen, "UDP address to serve QUIC on (host:port)")
	f.StringSliceVar(&o.certNames, "cert-names", nil, "DNS names the server certificate is valid for, besides localhost and the host name")
	f.StringSliceVar(&o.certAddrs, "cert-addrs", nil, "IP addresses the server certificate is valid for, besides 127.0.0.1 and ::1")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful stop waits for requests in flight")
	return cmd
}

// certNamesOf returns the names of the server certificate: the defaults
// plus the given names and addresses.
func certNamesOf(names, addrs []string) ([]string, error) {
	out := certs.DefaultNames()
	for _, a := range addrs {
		if net.ParseIP(a) == nil {
			return nil, fmt.Errorf("--cert-addrs: %q is not an IP address", a)
		}
		out = append(out, a)
	}
	for _, n := range names {
		if n == "" || net.ParseIP(n) != nil {
			return nil, fmt.Errorf("--cert-names: %q is not a DNS name (use --cert-addrs for addresses)", n)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func runServe(ctx context.Context, stdout, stderr io.Writer, o serveOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	names, err := certNamesOf(o.certNames, o.certAddrs)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ver, _ := buildVersion()

	// Signals are caught before the node opens, so that one arriving
	// during start-up still stops it gracefully.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	n, err := node.Open(ctx, node.Config{
		DataDir: o.dataDir, Listen: o.listen, CertNames: names, Logger: logger, Version: ver,
	})
	if err != nil {
		return err
	}
	printWelcome(stdout, n, ver)

	select {
	case s := <-sigs:
		logger.Info("stopping", "signal", s.String(), "timeout", o.shutdownTimeout)
	case <-ctx.Done():
		logger.Info("stopping", "reason", context.Cause(ctx))
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
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
		os.Exit(1)
	}
	return nil
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
	fmt.Fprintf(w, "ledge %s listening on %s (QUIC)\n", ver, n.Addr())
	fmt.Fprintf(w, "  data directory   %s\n", abs(p.DataDir))
	fmt.Fprintf(w, "  CA certificate   %s (clients trust this file)\n", abs(p.CA))
	fmt.Fprintf(w, "  server cert      %s\n", abs(p.Cert))
	fmt.Fprintf(w, "  admin token      %s %s\n", abs(p.AdminToken), token)
	fmt.Fprintf(w, "\nFrom another terminal in %s:\n", abs(filepath.Dir(p.DataDir)))
	fmt.Fprintf(w, "  ledge topic create demo\n")
	fmt.Fprintf(w, "  echo hello | ledge produce demo\n")
	fmt.Fprintf(w, "  ledge consume demo --from earliest\n")
	fmt.Fprintf(w, "From anywhere else:\n")
	fmt.Fprintf(w, "  ledge --server %s --ca %s --token \"$(cat %s)\" topic list\n", n.Addr(), abs(p.CA), abs(p.AdminToken))
	fmt.Fprintf(w, "  (or set LEDGE_SERVER, LEDGE_CA and LEDGE_TOKEN)\n")
	fmt.Fprintf(w, "Press Ctrl-C to stop.\n")
}
