// Package uplink forwards a node's topics to Kafka: one Forwarder per
// partition, each step one Kafka transaction holding the records and the
// forwarding position, so that a restart or a restored backup never
// forwards a record twice (docs/FENCING.md, section 9).
//
// A forwarder reads its partition only through the partition's owner (a
// Source: Poll, State and Lineage), like any other consumer: it never
// touches the log or the metadata store of the partition, and it holds
// retention back through the floor it reports (RetentionFloor). The
// Manager runs the forwarders of every configured uplink and keeps their
// specifications (Spec) in the node's metadata.
//
// This package does not serve requests: node/session's handlers, the node's
// status and its metrics read what Manager.List and Manager.Status report.
package uplink
