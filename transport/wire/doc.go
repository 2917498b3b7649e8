// Package wire is Ledge's binary protocol: the frames a client and a node
// exchange over QUIC streams, the request and reply messages inside them,
// and the status codes every reply carries. The record batches that
// produce requests and poll replies carry are package record's format;
// this package moves them as opaque bytes (NextBatch splits a poll reply's
// batches by their headers' lengths).
//
// It is pure: no sockets, no goroutines, no clocks, no state. It encodes
// to and decodes from byte slices and reads frames from an io.Reader, so
// transport/quic, the node and the SDK share one definition of every byte
// and the fuzz tests reach all of it. docs/PROTOCOL.md is the
// specification; this package is its reference implementation.
//
// # Frames
//
// A frame is a 12-byte header (length, version, flags, kind, request id)
// and a body. ReadFrame checks the declared size against a limit before it
// allocates and reads into a caller's buffer; a transport that moves whole
// frames bounds them with FrameLen and parses them with ParseFrame.
// StartFrame, FinishFrame, AppendRequest, AppendReply and AppendErrorReply
// append to a caller's buffer. With reused buffers neither side allocates
// per frame.
//
// On a stream the client sends request frames and the node answers each
// with one reply frame, in request order. A node answers what it cannot
// serve — an unknown kind, an unsupported version, a malformed body — with
// an error reply (CheckRequest, AppendErrorReply), never by crashing.
//
// # Messages
//
// Every request and reply is a struct implementing Message: Encode appends
// the body, Decode parses one. Decoders are strict (no trailing bytes,
// reserved bytes zero, enums known) and bounded: every length and count is
// checked against its limit and against the bytes left before anything is
// allocated for it, so arbitrary input can neither panic a decoder nor make
// it allocate more than a small multiple of the input's size.
//
// Decoded byte fields — a produce batch, a poll reply's batches, fence
// tokens — alias the frame body instead of copying it. They are valid as
// long as the frame's buffer is; whoever keeps one (storage keeps an
// appended batch) must not let that buffer be reused. Decoding into a
// message reused from a previous frame reuses its slices and keeps
// strings that did not change, so the steady state of a produce or poll
// stream decodes without allocating.
//
// # Status codes
//
// Status is the one enum of outcomes. Its RetryClass says what a client
// does next — retry, refresh, reinitialize, rejoin or give up — so no
// client keeps a table of its own. Fence rejections occupy 0x0100–0x01FF
// with the fence code in the low byte. *Error carries a status and a
// message, and errors.Is(err, StatusX) matches it.
//
// # Rationale
//
// Little-endian fixed-width integers, like the record batch format: the
// engine and the node read them with single loads, and the bytes saved by
// varints do not matter next to record payloads. Length-prefixed frames
// on ordered QUIC streams rather than one stream per request: a stream
// per request costs a round of flow-control and stream-limit bookkeeping,
// while pipelining on one stream keeps a partition's produce order with
// no sequencing above the transport. The frame header keeps its layout in
// every version so that a node can always answer a version it does not
// speak.
package wire
