// Command rawsink is the far end of the raw-stream ceilings measured
// across processes (the WAN link's, and the loopback ones placed as the
// servers are): it accepts raw TCP connections or raw QUIC streams, reads
// and discards everything, and closes its side when the sender has
// finished, so the sender can time the delivery of all it wrote. With
// --source it is the sending end instead: on each QUIC stream, once the
// client has written a byte, it writes 1 KiB messages through a 64 KiB
// buffer (ceiling.WriteMessages) for that long, then closes the stream.
//
// A client that names the protocol ceiling.RoundTripALPN (over QUIC, or
// over TLS 1.3 on TCP with --proto tls) gets the one-at-a-time round trip
// instead (ceiling.Answer): each 1 KiB message read whole is answered
// with 32 bytes.
//
// QUIC reads through the socket a Ledge node reads through
// (transport/quic.ListenUDP), or quic-go's own with --own-socket.
//
//	rawsink --proto tcp|tls|quic --listen HOST:PORT [--source 5s] [--own-socket]
//
// It prints "rawsink listening on HOST:PORT" once it accepts.
package main
