// Package ledgeclient drives a Ledge node through the Go SDK for the load
// generator: the SDK's producer (idempotent, batching, pipelined on one
// QUIC stream per partition) and its long-polling consumer.
package ledgeclient
