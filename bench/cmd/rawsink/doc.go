// Command rawsink is the far end of the raw-stream ceilings measured
// across processes (the WAN link's, and the loopback ones placed as the
// servers are): it accepts raw TCP connections or raw QUIC streams, reads
// and discards everything, and closes its side when the sender has
// finished, so the sender can time the delivery of all it wrote. With
// --source it is the sending end instead: on each QUIC stream, once the
// client has written a byte, it writes 1 KiB messages through a 64 KiB
// buffer (ceiling.WriteMessages) for that long, then closes the stream.
//
// QUIC reads through the socket a Ledge node reads through
// (transport/quic.ListenUDP), or quic-go's own with --own-socket.
//
//	rawsink --proto tcp|quic --listen HOST:PORT [--source 5s] [--own-socket]
//
// It prints "rawsink listening on HOST:PORT" once it accepts.
package main
