package quic

import (
	"net"
	"runtime"
	"sync/atomic"

	"golang.org/x/net/ipv4"
)

// yieldingConn is the UDP socket under a quic-go Transport, for the node
// and for clients alike: it reads datagrams in batches, as quic-go does
// itself, and yields the processor after each batch.
//
// quic-go's Transport reads the socket on one goroutine and queues each
// packet for its connection, whose own goroutine decrypts and handles it;
// past 256 packets queued and not yet handled, it drops them. With one
// processor (GOMAXPROCS 1, as on a small device, or a process held to one
// CPU), the reading goroutine runs on until the socket is empty, and the
// connection's goroutine waits for it: after anything else held the
// processor for a while (a consumer decoding a 4 MiB poll reply, a
// garbage collection), the socket holds more than 256 packets, and the
// reader drains them into the queue faster than the connection can take
// them. The dropped packets are declared lost, and the sender's congestion
// window, cut by each loss, stays near 256 packets: a consumer replaying a
// log, held to one CPU, received 20% less for it than with this socket,
// whose yield lets the connection handle each batch before the next is
// read. The socket's receive buffer (quic-go asks for 7 MiB) holds the
// rest meanwhile. A yield where nothing else waits costs next to nothing.
type yieldingConn struct {
	*net.UDPConn
	batch   *ipv4.PacketConn
	batches atomic.Uint64 // batch reads, for tests: quic-go uses ReadBatch only because it is there
}

func newYieldingConn(c *net.UDPConn) *yieldingConn {
	return &yieldingConn{UDPConn: c, batch: ipv4.NewPacketConn(c)}
}

// ReadBatch reads datagrams as quic-go's own batch reader would (one
// recvmmsg on Linux; it works for IPv6 sockets too), then yields.
func (c *yieldingConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	n, err := c.batch.ReadBatch(ms, flags)
	c.batches.Add(1)
	runtime.Gosched()
	return n, err
}
