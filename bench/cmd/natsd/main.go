package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
}

func run() error {
	store := flag.String("store", "", "JetStream store directory (required; created when missing)")
	listen := flag.String("listen", "127.0.0.1:0", "client address host:port; port 0 picks a free one")
	useTLS := flag.Bool("tls", false, "serve TLS 1.3 only, with a fresh CA written to STORE/ca.pem")
	syncMode := flag.String("sync", "default", "file store sync: default (sync_interval 2m, acks from the page cache) or always (fsync every write)")
	verbose := flag.Bool("v", false, "log the server's notices to stderr")
	version := flag.Bool("version", false, "print the NATS server version and exit")
	flag.Parse()
	if *version {
		fmt.Println(server.VERSION)
		return nil
	}
	if *store == "" {
		return fmt.Errorf("--store is required")
	}
	if err := os.MkdirAll(*store, 0o700); err != nil {
		return err
	}
	host, portStr, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("--listen: bad port %q", portStr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}

	opts := &server.Options{
		ServerName: "bench",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(*store, "jetstream"),
		NoSigs:     true,
		NoLog:      !*verbose,
		MaxPayload: 8 << 20,
	}
	switch *syncMode {
	case "default":
	case "always":
		opts.SyncAlways = true
	default:
		return fmt.Errorf("--sync: %q is neither default nor always", *syncMode)
	}
	if *useTLS {
		names := []string{"127.0.0.1", "localhost"}
		if host != "" && host != "127.0.0.1" {
			names = append(names, host)
		}
		eph, err := certs.NewEphemeral(names...)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*store, "ca.pem"), eph.CA.CertPEM(), 0o600); err != nil {
			return err
		}
		opts.TLS = true
		opts.TLSTimeout = 5
		opts.TLSConfig = &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{eph.Server},
		}
	}

	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	if *verbose {
		s.ConfigureLogger()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("server not ready after 30s")
	}
	fmt.Printf("natsd %s listening on %s\n", server.VERSION, s.Addr())
	<-sigs
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}
