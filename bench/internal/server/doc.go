// Package server builds the two servers of the comparison — the Ledge
// node (the parent module's cmd/ledge) and an embedded NATS server with
// JetStream (cmd/natsd) — and runs them as separate processes on fresh
// data directories, pinned to the server CPUs, with the same GOMAXPROCS,
// optionally inside a network namespace.
package server
