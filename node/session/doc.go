// Package session serves the requests of docs/PROTOCOL.md for one
// authenticated token: a Session per token on a connection, and a Call per
// request, whose methods are the handlers — one per request kind, taking
// and returning the protocol's messages (transport/wire), with the
// token's scope check inside. Every effect goes through the partition
// owners (node/owner), the group coordinator (node/group), the uplink
// manager (node/uplink) and the registries (node/tokens,
// node/pluginreg); nothing here changes a log or a consumer's progress
// around them.
//
// A session reaches the node only through its Node interface: the live
// topics, the registries, the coordinator, the uplinks, the limits and
// places of long polls, a clock and a logger. node implements it; the
// tests here implement it over in-memory partitions, without a listener.
//
// What it is not for: it reads no frame and writes no reply. The
// transports are adapters onto it, in package node: the QUIC frame loop
// decodes a frame, serves it with a Call it asked to defer its durability
// wait (Call.Defer, so a stream's next request starts while this one's
// effects become durable), and writes the reply in request order; the
// Kafka listener (node/kafka) calls a Session's own methods (ListTopics,
// Produce, Poll, JoinGroup, ...), which satisfy its kafka.Session
// interface without this package importing it.
//
// Overload (busy.go): a Shedder admits the node's produce requests
// against bounds of those in flight and of their bytes, and against the
// node's queueing delay (CoDel-like); a request it sheds changes nothing
// and is answered busy, with a retry-after for a client that announced it
// reads one (Session.BusyReply; docs/OPERATIONS.md, "Overload").
//
// Errors are values a client can test with errors.Is (ErrForbidden,
// ErrUnknownTopic, ...); StatusOf is the one place where they become wire
// statuses.
package session
