// Command compare runs Ledge and NATS JetStream side by side on this
// machine and writes what it measured to a results directory: a markdown
// table of absolute figures and median ratios, JSON, and charts.
//
//	cd bench && go run ./cmd/compare            # full run: 5 pairs per cell, about an hour
//	cd bench && go run ./cmd/compare --quick    # about a minute: proves the harness, judges nothing
//	cd bench && go run ./cmd/compare --sustained # gigabytes per run, both orders: writeback and page-cache costs count
//
// It builds both servers, runs each as its own process on a fresh data
// directory on a loopback port, pins them and itself to separate CPUs
// where it can, measures the ceilings (raw QUIC stream, sequential
// write, 64 KiB write + fdatasync, the one-at-a-time round trip over a
// raw QUIC stream and over TLS on TCP) in the same run, and with --wan
// repeats a few workloads over a link with 50 ms of round trip and 1 %
// loss. See bench/README.md for how to read the results.
package main
