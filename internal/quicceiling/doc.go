// Package quicceiling measures the raw QUIC ceiling of this machine: one
// quic-go stream on loopback, configured and socketed as transport/quic
// runs quic-go, with no framing, no budget and no node. The benchmarks
// (`ledge bench`, and bench/'s comparison) measure it in the same run as
// what they compare with it, so that a figure of the node or the SDK
// reads as a share of what the transport beneath could move.
//
// It is a measurement, not part of the transport: nothing on the node's
// or the client's path imports it.
package quicceiling
