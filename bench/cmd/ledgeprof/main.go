//go:build ledgeprof

// Command ledgeprof runs a Ledge node like `ledge serve` does, with a CPU
// profile (and, on request, heap and mutex profiles) written when it
// stops: the node under the comparison's load, seen from inside.
//
//	ledgeprof --data-dir DIR --listen 127.0.0.1:0 --cpuprofile cpu.pprof
//
// It prints "ledgeprof listening on HOST:PORT" once it serves, and stops
// cleanly on SIGINT or SIGTERM. compare --profile-ledge DIR runs it in
// place of `ledge serve`.
//
// It links the whole node, so it is behind the ledgeprof build tag: the
// rest of the bench module builds without the node's dependencies.
//
//	go build -tags ledgeprof ./cmd/ledgeprof
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/transport/quic/certs"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ledgeprof:", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data-dir", "ledge-data", "the node's data directory")
	listen := flag.String("listen", "127.0.0.1:0", "UDP address host:port")
	certAddrs := flag.String("cert-addrs", "", "comma-separated extra IP addresses for the server certificate")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile here when stopping")
	heapProfile := flag.String("heapprofile", "", "write a heap profile here when stopping")
	mutexProfile := flag.String("mutexprofile", "", "write mutex and block profiles here (suffixes .mutex, .block) when stopping")
	flag.Parse()

	names := certs.DefaultNames()
	if *certAddrs != "" {
		names = append(names, strings.Split(*certAddrs, ",")...)
	}
	if *mutexProfile != "" {
		runtime.SetMutexProfileFraction(5)
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	n, err := node.Open(ctx, node.Config{DataDir: *dataDir, Listen: *listen, CertNames: names, Logger: logger, Version: "ledgeprof"})
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
	}
	fmt.Printf("ledgeprof listening on %s\n", n.Addr())
	<-sigs
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	write := func(name, path string) {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ledgeprof:", err)
			return
		}
		defer f.Close()
		_ = pprof.Lookup(name).WriteTo(f, 0)
	}
	if *heapProfile != "" {
		write("heap", *heapProfile)
	}
	if *mutexProfile != "" {
		write("mutex", *mutexProfile+".mutex")
		write("block", *mutexProfile+".block")
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return n.Close(stopCtx)
}
