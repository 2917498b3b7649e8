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
// packet for its connection, whose own goroutine handles it; past 256
// packets queued it drops them. With one processor the reading goroutine
// runs on until the socket is empty, so a backlog built up while the
// processor was busy (a consumer decoding a large reply, a garbage
// collection) overflowed the queue, and the drops, taken for losses, held
// the sender's congestion window near 256 packets. The yield lets the
// connection handle each batch before the next is read; the socket's
// receive buffer holds the rest meanwhile. The package comment
// (Rationale: the socket) gives the measurements.
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
