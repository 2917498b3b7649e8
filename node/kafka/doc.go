// Package kafka serves the Kafka protocol on a TCP listener, so that
// programs written for Kafka (librdkafka and kcat, franz-go, kafkajs, the
// Java client) produce to and consume from a Ledge node unchanged.
//
// It is a translator, not a second broker: every request becomes the
// node's own request (a produce, a poll, a reset of a group's position, a
// group heartbeat) on a Session the node hands out for a Ledge token, and
// the node serves it through the partition owner exactly as it serves the
// QUIC protocol. Nothing here changes a log or a consumer's progress, and
// no fence rule is written here: the epochs Kafka carries are handed to
// the owner as the fence token's (docs/KAFKA.md says how they map: the
// history epoch is Kafka's leader epoch, a group member's epoch is the
// classic protocol's generation).
//
// What it is not for: replication, transactions, or Kafka's own
// configuration model. A connection authenticates with SASL/PLAIN, the
// password being a Ledge token; the token's scopes decide what each
// request may do.
//
// It is bounded as the QUIC listener is (docs/KAFKA.md, "Bounds"): only
// ApiVersions and SASL before authentication, small and within a
// deadline; caps on unauthenticated and authenticated connections, which
// a node shares with its QUIC listener (Admission); idle and read
// deadlines; at most MaxRequestElements topics and partitions answered a
// request, a Fetch or an OffsetCommit past it answered in part. A request's bytes are allocated as they arrive,
// its claims (array lengths, tagged fields, record counts) are checked
// against the bytes that carry them before anything is sized from them
// (bound.go), and a Produce is authorized before its batches are
// decompressed or converted.
//
// Messages are franz-go's kmsg, generated from Kafka's own definitions;
// record batches are converted once each way, since Ledge's stored batch
// (package record) is not Kafka's: on produce into a Ledge batch that the
// engine stores (compressed if the producer compressed it), on fetch into
// an uncompressed Kafka batch whose partition leader epoch is the
// partition's history epoch.
package kafka
