package quic

import (
	"log/slog"
	"net"
	"runtime"
	"sync/atomic"

	"golang.org/x/net/ipv4"
)

// yieldingConn is the UDP socket under a quic-go Transport, for the node
// and for clients alike: it reads datagrams in batches, as quic-go does
// itself, and yields the processor between batches.
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
//
// Where the kernel offers it (Linux's UDP_GRO), the socket also takes
// runs of datagrams of one flow as one buffer and splits them itself
// (groReader): a sender's segmented burst (quic-go sends with UDP_SEGMENT)
// crosses loopback as one, and is read with one system call rather than
// one per datagram.
type yieldingConn struct {
	*net.UDPConn
	batch   batchReader
	gro     *groReader    // nil without UDP_GRO
	batches atomic.Uint64 // batch reads, for tests: quic-go uses ReadBatch only because it is there
	// received counts the datagrams read: a client's Dial tells a node
	// that answers (slowly) from one that is silent by it.
	received atomic.Uint64
	peers    *peerTable // a listener's: who sent to which connection ID (peers.go); nil on a client
	stamps   rxStamps   // the kernel's arrival stamps, turned on by a listener's first queueDelay (rxqueue.go)
}

// ListenUDP opens a UDP socket that quic-go reads as a node or a client of
// this package reads its own: in batches, yielding after each, with
// coalesced bursts where the kernel offers them (see Rationale: the
// socket). Hand it to quic-go's Listen or Dial to measure quic-go as
// Ledge runs it, as the raw-stream ceilings do; close it after.
func ListenUDP(addr *net.UDPAddr) (net.PacketConn, error) {
	return listenUDP(addr)
}

// listenUDP opens the socket a Listener or a client connection hands
// quic-go.
func listenUDP(addr *net.UDPAddr) (*yieldingConn, error) {
	udp, err := net.ListenUDP("udp", addr)
	if err != nil {
		return nil, err
	}
	return newYieldingConn(udp), nil
}

// batchReader reads datagrams in batches: an ipv4.PacketConn, or a test's
// fake.
type batchReader interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
}

func newYieldingConn(c *net.UDPConn) *yieldingConn {
	y := &yieldingConn{UDPConn: c, batch: ipv4.NewPacketConn(c)}
	if enableGRO(c) {
		y.gro = &groReader{}
	}
	return y
}

// ReadBatch yields the processor, then reads datagrams as quic-go's own
// batch reader would (one recvmmsg on Linux; it works for IPv6 sockets
// too). quic-go calls it once it has queued every datagram of the last
// batch for its connection, so the yield lets the connection handle them
// first: the next batch is read only then, and a lone request is answered
// before the reader looks at the socket again. With UDP_GRO, datagrams
// already read are handed over first, and the yield comes before each
// system call, or after groYieldEvery datagrams.
func (c *yieldingConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	c.batches.Add(1)
	if c.gro == nil {
		runtime.Gosched()
		n, err := c.batch.ReadBatch(ms, flags)
		c.readSome(ms, n)
		return n, err
	}
	// Datagrams already read out of the socket are handed over in
	// quic-go's batches of 8 without yielding in between, up to what the
	// connection handles between two sends (32 packets): it then
	// acknowledges a burst with one packet rather than one per batch.
	// Far below the connection's queue of 256.
	if g := c.gro; g.next >= g.n || g.sinceYield >= groYieldEvery {
		g.sinceYield = 0
		runtime.Gosched()
	}
	n, err := c.gro.read(c.batch, ms, flags)
	c.gro.sinceYield += n
	c.readSome(ms, n)
	return n, err
}

// readSome notes the n datagrams just read into ms.
func (c *yieldingConn) readSome(ms []ipv4.Message, n int) {
	if n <= 0 {
		return
	}
	c.received.Add(uint64(n))
	if c.peers != nil {
		c.peers.observe(ms[:n])
	}
}

// groReader reads a socket with UDP_GRO into buffers of its own, large
// enough for a coalesced run of datagrams (64 KiB at most), and hands the
// datagrams out one per message of the caller's batch. What one system
// call read is handed out over as many calls as it takes.
type groReader struct {
	msgs       []ipv4.Message // read into by the last system call, msgs[:n]
	n          int
	next       int // message being handed out
	off        int // where its next datagram starts
	seg        int // its datagrams' length (the last may be shorter)
	sinceYield int // datagrams handed out since the last yield
	// coalesced counts the messages that held more than one datagram,
	// for tests: the kernel coalesces only where it can.
	coalesced atomic.Uint64
	// rx, once a listener asks for its queue's wait, strips the kernel's
	// arrival stamps and measures the wait (rxqueue.go).
	rx atomic.Pointer[rxDelay]
}

const (
	groBatch   = 8       // messages per system call, as quic-go reads
	groBufSize = 1 << 16 // a coalesced run is at most 64 KiB
	// groOOBBufLen holds the control messages quic-go sizes for (128
	// bytes) and the kernel's arrival stamp, which is stripped before
	// they are handed on.
	groOOBBufLen = 256
	// groYieldEvery is how many datagrams are handed out between yields
	// at most: what quic-go's connection handles between two sends.
	groYieldEvery = 32
)

func (g *groReader) read(b batchReader, ms []ipv4.Message, flags int) (int, error) {
	if g.next >= g.n {
		if g.msgs == nil {
			g.msgs = make([]ipv4.Message, groBatch)
			for i := range g.msgs {
				g.msgs[i].Buffers = [][]byte{make([]byte, groBufSize)}
				g.msgs[i].OOB = make([]byte, groOOBBufLen)
			}
		}
		n, err := b.ReadBatch(g.msgs, flags)
		if n <= 0 || err != nil {
			return 0, err
		}
		if rx := g.rx.Load(); rx != nil {
			rx.took(g.msgs[:n])
		}
		g.n, g.next, g.off = n, 0, 0
		g.seg = g.segmentSize(0)
	}
	i := 0
	for i < len(ms) && g.next < g.n {
		m := &g.msgs[g.next]
		payload := m.Buffers[0][:m.N]
		end := len(payload)
		if g.seg > 0 {
			end = min(g.off+g.seg, end)
		}
		out := &ms[i]
		out.N = copy(out.Buffers[0], payload[g.off:end])
		out.NN = copy(out.OOB, m.OOB[:m.NN])
		out.Addr, out.Flags = m.Addr, m.Flags
		i++
		if g.off = end; g.off >= len(payload) {
			g.next, g.off = g.next+1, 0
			if g.next < g.n {
				g.seg = g.segmentSize(g.next)
			}
		}
	}
	return i, nil
}

// segmentSize is the length of the datagrams message i holds, 0 if it is
// one datagram.
func (g *groReader) segmentSize(i int) int {
	m := &g.msgs[i]
	seg := groSegmentSize(m.OOB[:m.NN])
	if seg > 0 && seg < m.N {
		g.coalesced.Add(1)
	}
	return seg
}

// quicGoBufferSize is what quic-go asks of a socket's receive and send
// buffers when a Transport takes it (SO_RCVBUF, then SO_RCVBUFFORCE with
// CAP_NET_ADMIN; the same for sending), measured as the kernel reports it
// back. Past net.core.rmem_max (wmem_max) without the capability, it gets
// the maximum and says so once on the standard logger.
const quicGoBufferSize = 7 << 20

// logBuffers says once, at a listener's start, what the socket's buffers
// hold against what quic-go asked: a receive buffer below it drops the
// datagrams that arrive while the node is paused (a collection), and the
// peers' retransmissions then add to the load. docs/OPERATIONS.md (UDP
// buffers) says what to raise.
func (c *yieldingConn) logBuffers(log *slog.Logger) {
	rcv, snd, ok := socketBuffers(c.UDPConn)
	if !ok {
		return
	}
	attrs := []any{"receive", rcv, "send", snd, "wanted", quicGoBufferSize}
	if rcv < quicGoBufferSize || snd < quicGoBufferSize {
		log.Warn("udp socket buffers", append(attrs, "raise", "net.core.rmem_max and net.core.wmem_max (docs/OPERATIONS.md)")...)
		return
	}
	log.Info("udp socket buffers", attrs...)
}
