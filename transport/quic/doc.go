// Package quic is Ledge's transport: a QUIC listener and dialer (quic-go,
// TLS 1.3, ALPN "ledge/1") that move length-bounded frames over
// bidirectional streams. It knows where a frame ends (transport/wire's
// frame header, through [Framing]) and nothing else about it: message
// types live in transport/wire, request handling in the node. The TLS
// material of a node lives in the certs subpackage.
//
// # Server
//
// [Listen] returns a [Listener]. Each connection authenticates once: the
// first frame of its first stream goes to [Config.Authenticate], which
// returns an [Identity] (with a token id) and a reply, or an error that
// closes the connection with an application code and reason. [Listener.Accept]
// yields authenticated [Conn]s; [Conn.AcceptStream] yields [Stream]s, the
// first being the authentication stream. A stream is read by one goroutine
// with [Stream.ReadFrame] and answered in request order with
// [Stream.Reply], with [Stream.WriteReply] (replies to a burst of requests
// leave in one write), or with WriteFrame, Flush and [Request.Release].
// [Stream.WriteFrameParts] writes a frame given in pieces, handing large
// ones (a poll reply's stored batches) to QUIC without joining them first.
// Frames of [MinPooledFrame] bytes and more are read into buffers that
// [RecycleFrame] (or the last owner of a [SharedFrame]) hands back once
// nothing holds them: a node reads its next produce request into the
// memory of one whose batch the engine has written, instead of allocating
// and zeroing it. A [Request] is reused once released.
// [Listener.CloseToken] closes every connection of a revoked token.
// [Listener.Peers] lists the clients' connections as a successor would
// reset them after a crash, and [Listener.ResetPeers] sends those of a
// predecessor a stateless reset (see Rationale: the quic-go settings).
// [Listener.Shutdown] stops accepting, lets requests already read be
// answered and waits for clients to read the replies, then closes.
//
// # Client
//
// [Dial] returns a [ClientConn]; [ClientConn.OpenStream] a [ClientStream];
// [NewPipeline] runs many requests in flight on one stream and matches
// replies in order.
//
// # Errors
//
// Connections and streams end with a [Code]. Errors are values for
// errors.Is: [ErrServerClosed], [ErrUnauthenticated], [ErrTokenRevoked],
// [ErrFrameTooLarge], [ErrNotProcessed] and so on; [IsRetryable] says
// whether trying again can help.
//
// # Rationale: the quic-go settings
//
// quic-go's defaults (100 streams, 512 KiB initial windows) suit HTTP/3
// browsing, not a message node with hundreds of requests in flight. The
// server's defaults, all in [Config]:
//
//   - MaxIncomingStreams 1024. Produce to a partition keeps one ordered
//     stream and every long poll has its own, so a client with many
//     partitions and consumers needs hundreds of concurrent streams; 100
//     would make OpenStream wait.
//   - InitialStreamReceiveWindow 768 KiB, MaxStreamReceiveWindow 8 MiB.
//     quic-go's auto-tuning grows a window whose data is read within a
//     few round trips, up to 8 MiB, which covers a 50 ms path at over
//     1 Gbit/s.
//   - InitialConnectionReceiveWindow 256 KiB, MaxConnectionReceiveWindow
//     32 MiB. The initial connection window is what any connection may
//     make the node buffer before the node reads a byte of it, and it is
//     granted in the handshake, before the client has authenticated: at
//     1 MiB, 4096 connections could pin 4 GiB. A busy connection's window
//     grows with auto-tuning (on loopback within the first few requests),
//     and the limit lets several hot streams grow at once.
//   - ReceiveWindowBudget 256 MiB over all connections bounds that
//     growth: each increase past the initial window draws from it, and
//     only authenticated connections grow. So what quic-go may buffer for
//     the node is at most (MaxConns + MaxUnauthenticated) × 256 KiB +
//     256 MiB, while connections cost nothing of it until data arrives.
//     (The budget used to reserve each connection's 1 MiB initial window
//     at admission, which capped a node at 256 connections whatever
//     MaxConns said.)
//   - MaxConns 4096 authenticated connections; MaxUnauthenticated 256
//     handshaking or authenticating ones, the oldest evicted when one more
//     arrives; a handshake token bucket per source address (50/s, burst
//     100) that a connection's token returns to once it authenticates;
//     QUIC Retry under load; HandshakeWaitTarget 250 ms, past which
//     (the handshakes the node took up over 100 ms all having waited
//     longer for it) new connections are refused before any TLS work,
//     so that a crowd dialing at once is served at the node's handshake
//     rate. See admission.go for why each, and
//     docs/OPERATIONS.md for what a connection costs. A node's Kafka
//     listener takes its connections' places from the same caps
//     (Listener.Admission, admission_shared.go), the source buckets
//     aside.
//   - MaxFrameSize 8 MiB for requests, checked from the frame header
//     before allocation; a larger frame stops that stream only.
//   - InflightBudget 64 MiB: bytes of requests read and not yet answered.
//     A reader takes a frame's size from it before reading the body and
//     gives it back when the reply is sent. Past it readers wait, the
//     unread bytes stay in the QUIC window, and flow control stops the
//     client: the node slows down instead of growing. [Stats] counts the
//     waits; [Config.OnBackpressure] reports each one.
//   - MaxIdleTimeout 60 s; no server keep-alives (clients send them every
//     15 s, which also keeps NAT bindings open during long polls); the
//     handshake is bounded at 10 s and the authentication frame at 5 s.
//   - No unidirectional streams, no datagrams, no 0-RTT (replayable
//     requests would need their own rules). Partial-delivery stream resets
//     (RESET_STREAM_AT) are on: a stream ended because of a bad frame
//     still delivers the replies written before it, then the reason.
//   - Stateless resets only with [Config.StatelessResetKey], which must
//     survive restarts to be of use (derive it from a secret kept in the
//     data directory). The listener's connection IDs are 16 bytes, not 4,
//     so that every packet carrying a request is over the 42 bytes quic-go
//     needs to answer it with a reset. A client parked in a long poll
//     sends no such packet (keep-alives are shorter), so a node that was
//     killed could not reach it until its poll ran out. With a key, the
//     node's socket notes, per short-header packet it reads, the
//     connection ID each client address sends to (a map lookup per
//     datagram, one lock per batch); [Listener.Peers] lists them and a
//     successor's [Listener.ResetPeers] sends each a reset unasked, with
//     quic-go's token (HMAC-SHA256 of the connection ID under the key). A
//     client honours only the token of the connection ID it currently
//     sends to, which is why the socket, which sees those IDs, keeps the
//     list rather than the connection ID generator, which does not know
//     whose ID it makes.
//
// On loopback the windows neither help nor hurt: interleaved runs of the
// raw ceiling with quic-go's defaults and with these settings gave medians
// of 327 and 344 MB/s, within the noise of a busy 2-core machine. They
// matter on long paths, where a stream moves at most a window per round
// trip.
//
// The client's windows are larger (2 MiB/16 MiB per stream, 4 MiB/64 MiB
// per connection) because poll replies are the protocol's large frames
// (MaxFrameSize 64 MiB on the client): a replay should never wait for a
// window update on loopback, and should fill a long path.
//
// # Rationale: the socket
//
// Node and client hand quic-go a UDP socket of their own (yieldingConn)
// that reads datagrams in batches, as quic-go would, and yields the
// processor between batches. quic-go queues at most 256 received packets
// per connection and drops the rest; with one processor its reading
// goroutine could fill that queue from a backlog in the socket (built up
// while a consumer decoded a large reply) before the connection's
// goroutine ran, and the drops, taken for losses, held the sender's
// congestion window near 256 packets. A consumer held to one CPU replayed
// a log 13–25% faster in interleaved runs once the reader yielded, with
// no packet declared lost and a window grown to megabytes.
//
// Where the kernel offers it (Linux's UDP_GRO), the socket also takes a
// run of datagrams of one flow as one buffer and hands quic-go the
// datagrams one by one. quic-go sends its bursts segmented (UDP_SEGMENT);
// on loopback such a burst, some 40 packets, reaches the receiving socket
// as it was sent, and is read with one system call and no segmentation
// in the kernel, instead of one call per packet. A consumer replayed a log
// 40–50% faster with it, the node and the client each held to one CPU.
// The raw ceilings (internal/quicceiling, bench/) read through the same
// socket ([ListenUDP]), so that they stay the ceiling of the transport
// as Ledge runs it; the bench also measures quic-go's own socket, for
// reference.
//
// Clients of one process may share a socket ([Transport],
// [ClientConfig.Transport]): a gateway relaying for hundreds of devices
// then holds one socket and one reading goroutine instead of one of each
// per device. quic-go's Transport holds one lock while it sets up each new
// connection, so a crowd of connections dialing at once over one socket
// queues on it: spread a large fleet over several.
//
// # Rationale: what an idle connection holds
//
// At the edge most connections are idle most of the time: a device
// sends a record now and then and waits for a command. So a stream holds
// its 64 KiB read and write buffers only while they hold bytes (from
// pools, given back once emptied), and a connection's end is handled by
// [context.AfterFunc] rather than a goroutine waiting for it. At 5,000
// idle devices (two streams each) the buffers had been 1.2 GB of a
// 1.47 GB heap; at 10,000, with them pooled, a device cost the node 44 KB
// of heap, most of it quic-go's and TLS's own state, and the stacks of
// quic-go's two goroutines and one reader per stream (bench/README.md).
//
// What is left is quic-go's floor. TestIdleFootprint (run with
// LEDGE_IDLE_CONNS=N) holds N idle devices in a child process and
// measures the server, served by this package or by quic-go alone
// (LEDGE_IDLE_BARE=1): at 1,000 connections and the node's collector
// setting, 95 KB resident a connection against quic-go's own 90 KB, of
// which 39 KB of live heap (quic-go 24.5 KB, crypto/tls 10.2 KB, this
// package 2.6 KB) and four goroutines, none of them this package's:
// quic-go's two, and the application's acceptor and stream reader, the
// fewest quic-go's blocking accepts and reads allow. Receive windows
// cost nothing until data arrives (docs/OPERATIONS.md, Footprint). On
// the client, a [Pipeline] starts its writer goroutine with the first
// frame that queues, so a device whose poll [Pipeline.Send] wrote itself
// holds none.
//
// # Rationale: what a request costs
//
// A device's record is a request frame in and a reply frame out. This
// package's own part allocates nothing once warm (TestServeFrameAllocations:
// the [Request] is reused after [Request.Release], the frame is read into
// recycled memory, the read and write buffers come from pools), and
// TestFleetFloor (LEDGE_FLOOR_DEVICES=N) shows what the rest costs: N
// devices of a record a second served by quic-go alone, or by the
// [Listener], cost a server the same CPU per exchange within the noise
// (bench/README.md). The floor is quic-go's: three datagrams an exchange
// (the request, the reply carrying its ACK, the client's delayed ACK),
// each sealed, sent with a system call of its own, received and opened in
// user space. quic-go's Config sets neither the ACK delay nor
// the ACK frequency.
//
// # Rationale: graceful shutdown
//
// QUIC has no way to tell an application that its stream data was
// acknowledged, and a CONNECTION_CLOSE discards what is not. So a stream
// ends in two steps: the server answers what it read and ends its side;
// the client reads to the end and ends its side, which the server reads
// as proof of delivery. Only then does the connection close. The client
// side of this package ([Pipeline]) does its part; requests it had sent
// that got no reply were never read and fail with [ErrNotProcessed].
//
// # Rationale: the ceiling
//
// internal/quicceiling measures a raw quic-go stream (1 KiB writes
// through a 64 KiB bufio.Writer on loopback) with these settings and this
// package's socket; benchmarks of the node and the SDK report themselves
// against it, measured in the same run on the same machine. It lives
// outside this package: a measurement is no part of the transport.
package quic
