// Package natsclient drives NATS JetStream through nats.go's jetstream
// package for the load generator: async publishes with a bounded number
// pending, synchronous publishes, and an ordered consumer for replays.
package natsclient
