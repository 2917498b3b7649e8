// Package node wires a Ledge node together and serves it: Open reads a
// Config, opens the storage engine, and starts the partition owners, the
// group coordinator, the plugin host, the uplinks and the QUIC and Kafka
// listeners; the request handlers (server*.go) turn each request of
// docs/PROTOCOL.md into calls on them. A handler is a method of a call:
// one request of a token's session, taking and returning the protocol's
// messages, with its scope check inside and no transport in sight. The
// QUIC frame loop (a request is a call read from a frame) and the Kafka
// adapter (kafka_adapter.go, which imports no QUIC package) both build
// calls.
//
// # Where a change goes
//
//   - node/owner: the partition owner, the only writer of a partition's
//     progress (polls, commits, produce, state, purge, retention), and the
//     producer and session registries it consults. Every fence check of
//     docs/FENCING.md is called from there.
//   - node/group: the consumer group coordinator (epochs, assignors,
//     reconciliation, commit policies of groups).
//   - node/uplink: the Kafka forwarder of a topic, and the manager of a
//     node's uplinks.
//   - node/ops: the HTTP endpoints for operators: metrics, health,
//     readiness, the status API and page.
//   - node/kafka: the Kafka protocol listener, an adapter onto this
//     package.
//   - node/pluginreg: the plugin registry (modules, records, commit
//     policies, the loader after a start) and the plugin steps of a
//     poll (filters, commit policies).
//   - node/tokens: the registry of bearer tokens (create, authenticate,
//     revoke), kept in the node's metadata.
//   - node/statuspage: the status page's HTML.
//   - node (this package): Open and Config, topics, the request handlers
//     of the protocol (groups, uplinks and plugins included) as methods
//     of a call, the QUIC frame loop and the Kafka adapter that build
//     calls, and the snapshots of its state that node/ops reads.
//
// # Import rules
//
// Imports flow one way:
//
//	cmd/ledge → {node, node/ops}
//	node → {node/owner, node/group, node/uplink, node/ops, node/kafka,
//	        node/pluginreg, node/tokens}
//	node/ops → {node/uplink, node/statuspage}
//	node/pluginreg → {node/group, plugins}
//	node/group, node/uplink, node/ops, node/pluginreg, node/tokens → node/owner
//	node/owner → {engine, fence, record}
//
// internal/layout's test checks these rules, and DESIGN.md's, with go
// list:
//
//   - node/owner imports nothing of node/... and no transport: it learns
//     of group members through its Members interface, which the
//     coordinator implements, and of its storage through PartitionLog and
//     Metadata.
//   - node/group drives owners only through PartitionAssigner (Assign,
//     Unassign), and reads their logs only to report a group's offsets.
//   - node/uplink reaches a partition only through its owner (an
//     uplink.Source is an *owner.Owner): it never opens a log or a
//     metadata key of a partition itself.
//   - node/group and node/uplink do not import each other, and neither
//     serves a request: the handlers that do are this package's.
//   - node/ops reads a node only through its Source interface, which
//     *Node implements; it never imports node, and changes nothing.
//   - node/kafka imports neither node nor the owner: node adapts itself to
//     the listener's interfaces (kafka_adapter.go, which imports no QUIC
//     package either).
//   - node/pluginreg and node/tokens are registries: they serve no
//     request and import no listener.
//   - Packages named ...test (node/owner/ownertest,
//     node/uplink/uplinktest, node/ops/opstest) are test support: only
//     _test.go files import them. So are internal/fullfs, internal/sim and
//     internal/testtool: the release binary links none of them (cmd/ledge
//     has its test disk only under the ledgetest build tag).
package node
