// Command natsd runs an embedded NATS server with JetStream on a fresh
// store directory: the JetStream side of the comparison, as a process of
// its own like the Ledge node.
//
//	natsd --store DIR [--listen 127.0.0.1:0] [--tls] [--sync default|always]
//
// It prints "natsd VERSION listening on HOST:PORT" once it accepts
// connections and stops cleanly on SIGINT or SIGTERM. With --tls it
// serves TLS 1.3 only, with a fresh CA written to DIR/ca.pem — the same
// ECDSA P-256 certificates the Ledge node makes for itself.
package main
