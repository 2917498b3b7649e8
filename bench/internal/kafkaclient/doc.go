// Package kafkaclient drives a Ledge node's Kafka listener with franz-go
// (kgo), the comparison's "kafka" column: the same producer workloads as
// the SDK's over QUIC, through a Kafka client nobody here wrote. Topics
// are created over QUIC (a Kafka CreateTopics cannot set a topic's
// durability); replays are not measured through Kafka.
package kafkaclient
