// Package downlink appends the records of a Kafka topic to a local topic,
// exactly once: the other direction of node/uplink.
//
// A Downlink consumes every partition of its Kafka topic directly (no
// Kafka consumer group) and appends Kafka partition k to local partition
// k mod n, as an idempotent producer of the partition's owner registered
// under a name of its own for (local topic, Kafka topic, k). Keys,
// values, timestamps and headers are kept, and each appended record
// gains two headers, HeaderKafkaPartition and HeaderKafkaOffset, that say
// where it came from.
//
// The Kafka position is not kept apart from the records: it is the
// offset header of the newest batch the producer appended to its local
// partition, which the owner's producer state names (Owner.ProducerState),
// so the position is exactly as durable as the records. On every start
// the downlink first initializes its producers, which bumps their epochs
// and fences every older incarnation (a stopped loop still running, a
// replaced downlink), and only then reads the position back. A checkpoint
// in the node's metadata, written after each durable append, covers a
// newest batch that retention or a purge has since deleted.
//
// The Manager runs the downlinks of a node, one per local topic, and
// keeps their specifications in the node's metadata. This package serves
// no request: node/session's handlers, the node's status and its metrics
// read what Manager.List and Manager.Status report.
package downlink
