// Package node wires a Ledge node together and serves it: Open reads a
// Config, opens the storage engine, and starts the partition owners, the
// group coordinator, the plugin host, the uplinks and the QUIC and Kafka
// listeners. The requests of docs/PROTOCOL.md are served by node/session:
// one session per authenticated token, a method per request kind, the
// scope checks inside, and no transport in sight. This package adapts
// both listeners onto it: the QUIC frame loop (server.go: a request is a
// session's call read from a frame, its reply written in request order
// once its effects are durable; requests are pooled, and the request
// type says who owns one when, up to its reply) and the Kafka adapter
// (kafka_adapter.go, which hands the listener a session and imports no
// QUIC package). The node reaches its sessions as a session.Node
// (sessionNode).
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
//   - node/downlink: a Kafka topic appended to a local topic exactly
//     once, through the owners as an idempotent producer, and the
//     manager of a node's downlinks.
//   - node/transform: the transforms (topic to topic through a transform
//     plugin, exactly once), each a member of an internal group, and
//     their manager.
//   - node/ops: the HTTP endpoints for operators: metrics, health,
//     readiness, the status API and page.
//   - node/session: the request handlers of the protocol (topics,
//     produce and poll, commits and state, tokens, groups, uplinks,
//     plugins), as methods of a session's call, with their scope checks;
//     and a session's requests as the Kafka listener asks them.
//   - node/kafka: the Kafka protocol listener, an adapter onto a
//     session.
//   - node/pluginreg: the plugin registry (modules, records, commit
//     policies, the loader after a start) and the plugin steps of a
//     poll (filters, commit policies).
//   - node/tokens: the registry of bearer tokens (create, authenticate,
//     revoke), kept in the node's metadata.
//   - node/statuspage: the status page's HTML.
//   - node (this package): Open and Config, topics, the QUIC frame loop
//     and the Kafka adapter onto sessions, and the snapshots of its
//     state that node/ops reads.
//
// # Import rules
//
// Imports flow one way:
//
//	cmd/ledge → {node, node/ops}
//	node → {node/session, node/owner, node/group, node/uplink, node/ops,
//	        node/kafka, node/pluginreg, node/tokens, node/downlink,
//	        node/transform}
//	node/session → {node/owner, node/group, node/uplink, node/pluginreg,
//	                node/tokens, node/downlink, node/transform,
//	                transport/wire}
//	node/downlink → {node/owner, node/uplink (its TLS and SASL)}
//	node/ops → {node/uplink, node/downlink, node/statuspage}
//	node/transform → {node/owner, node/group, plugins}
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
//     serves a request: the handlers that do are node/session's.
//   - node/transform reads and writes partitions only through their
//     owners, joins its internal group through the coordinator and calls
//     plugins through the host; it serves no request either.
//   - node/session imports neither node, node/kafka, node/ops nor any
//     transport (transport/quic, quic-go): it reaches the node only
//     through its Node interface (topics, registries, coordinator,
//     uplinks, poll limits), which node implements, as node/ops reaches
//     it through Source.
//   - node/ops reads a node only through its Source interface, which
//     *Node implements; it never imports node, and changes nothing.
//   - node/kafka imports neither node, node/session nor the owner: it
//     owns its Backend and Session interfaces, and node hands it a
//     *session.Session for each connection (kafka_adapter.go, which
//     imports no QUIC package either).
//   - node/pluginreg and node/tokens are registries: they serve no
//     request and import no listener.
//   - Packages named ...test (node/owner/ownertest,
//     node/uplink/uplinktest, node/ops/opstest) are test support: only
//     _test.go files import them. So are internal/fullfs, internal/sim and
//     internal/testtool: the release binary links none of them (cmd/ledge
//     has its test disk only under the ledgetest build tag).
package node
