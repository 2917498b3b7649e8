// Package group is the consumer group coordinator, server-driven in the
// spirit of Kafka's KIP-848: members join, heartbeat and leave; the
// coordinator computes each group's target assignment (the assignors),
// members reconcile toward it, and group epochs, member epochs and
// assignment epochs fence the work of members that lost a partition
// (docs/FENCING.md). It also keeps each group's commit policy.
//
// The coordinator installs every change of a partition's holder as a
// step of the partition's owner (PartitionAssigner, which *owner.Owner
// is) and answers the owners' questions about members (Groups.Member,
// their owner.Members): the owners check commits and polls, the
// coordinator never does. It imports node/owner for those interfaces and
// the metadata store; node/owner never imports it.
//
// It serves no request and runs no goroutine of its own but Run: the
// request handlers of node/session call Join, Heartbeat, Leave, Describe
// and Delete.
package group
