// Package node wires a Ledge node together and serves it: Open reads a
// Config, opens the storage engine, and starts the partition owners, the
// group coordinator, the plugin host, the uplinks and the QUIC and Kafka
// listeners; the request handlers (server*.go) turn each request of
// docs/PROTOCOL.md into calls on them.
//
// # Where a change goes
//
//   - node/owner: the partition owner, the only writer of a partition's
//     progress (polls, commits, produce, state, purge, retention), and the
//     producer and session registries it consults. Every fence check of
//     docs/FENCING.md is called from here.
//   - node/uplink: the Kafka forwarder of a topic, and the manager of a
//     node's uplinks.
//   - node/kafka: the Kafka protocol listener, an adapter onto this
//     package.
//   - node/statuspage: the status page's HTML.
//   - node (this package): Open and Config, topics, tokens, plugins, the
//     group coordinator, the request handlers, and the node's HTTP
//     endpoints (metrics, health, status).
//
// # Import rules
//
// Imports flow one way, and each rule is one a reviewer can check with
// go list:
//
//	cmd/ledge → node → {node/owner, node/uplink, node/kafka, node/statuspage}
//	node/uplink → node/owner
//	node/owner → {engine, fence, transport/wire}
//
//   - node/owner imports nothing of node/...: it learns of group members
//     through its Members interface, which the coordinator implements, and
//     of its storage through PartitionLog and Metadata.
//   - node/uplink reaches a partition only through its owner (an
//     uplink.Source is an *owner.Owner): it never opens a log or a
//     metadata key of a partition itself.
//   - node/kafka imports neither node nor the owner: node adapts itself to
//     the listener's interfaces.
//   - Packages named ...test (node/owner/ownertest,
//     node/uplink/uplinktest) are test support: only _test.go files import
//     them.
package node
