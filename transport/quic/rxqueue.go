package quic

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"
)

// The socket's queue: past its CPU, the node's wait is not in its own
// goroutines but ahead of them, in the UDP socket's receive buffer, where
// datagrams queue until quic-go reads them. The Go scheduler does not see
// that wait, so the node's shedding did not either (docs/OPERATIONS.md,
// "Overload"). Where the kernel stamps each datagram with the time it
// arrived (Linux's SO_TIMESTAMPNS), the reader compares the stamp of the
// first datagram of each system call with the time it was read: the wait
// of the datagram at the head of the queue, as CoDel measures a queue's
// sojourn time. The least such wait over a measure's period is the
// queue that stood all along, not a burst that drained.

// rxDelay keeps the waits the socket's reads measured since the last
// sample. Its methods are safe for concurrent use.
type rxDelay struct {
	epoch    time.Time    // the monotonic base of lastRead
	minWait  atomic.Int64 // least head wait since the last sample, ns; noWait when none was read
	lastRead atomic.Int64 // when a system call last returned datagrams, ns after epoch
}

const noWait = math.MaxInt64

func newRxDelay() *rxDelay {
	r := &rxDelay{epoch: time.Now()}
	r.minWait.Store(noWait)
	return r
}

// took strips the kernel's arrival stamps from the control messages of
// the datagrams one system call read, so that quic-go sees what it did
// before, and records how long the first of them waited in the socket.
func (r *rxDelay) took(ms []ipv4.Message) {
	now := time.Now()
	r.lastRead.Store(int64(now.Sub(r.epoch)))
	var first int64
	for i := range ms {
		rest, stamp := cutRxTimestamp(ms[i].OOB[:ms[i].NN])
		ms[i].NN = len(rest)
		if i == 0 {
			first = stamp
		}
	}
	if first == 0 {
		return
	}
	// A stamp ahead of the clock (the clock stepped back) is no wait.
	wait := max(now.UnixNano()-first, 0)
	for {
		cur := r.minWait.Load()
		if wait >= cur || r.minWait.CompareAndSwap(cur, wait) {
			return
		}
	}
}

// sample returns the queue's wait since the previous sample: the least
// wait of the datagrams that the system calls read first meanwhile, or,
// when nothing was read and the socket holds datagrams, how long ago the
// last read was (the reader has not come back to a queue that stands).
func (r *rxDelay) sample(holds func() bool) time.Duration {
	if w := r.minWait.Swap(noWait); w != noWait {
		return time.Duration(w)
	}
	if !holds() {
		return 0
	}
	return max(time.Since(r.epoch)-time.Duration(r.lastRead.Load()), 0)
}

// rxStamps turns the stamps on for the socket's reads, once: its first
// queueDelay. Only a node's listener asks, so a client's sockets never
// pay for them.
type rxStamps struct {
	once sync.Once
	on   bool
}

// queueDelay is how long the datagrams the socket's reads returned since
// the previous call had waited in its receive buffer (rxDelay.sample); 0
// where the kernel does not stamp them, or the socket is not read
// through a reader of this package's own (groReader: Linux 5.0 and
// later).
func (c *yieldingConn) queueDelay() time.Duration {
	c.stamps.once.Do(func() {
		if c.gro == nil {
			return
		}
		// The stamps are stripped before the first one can arrive.
		c.gro.rx.Store(newRxDelay())
		if c.stamps.on = enableRxTimestamps(c.UDPConn); !c.stamps.on {
			c.gro.rx.Store(nil)
		}
	})
	if !c.stamps.on {
		return 0
	}
	return c.gro.rx.Load().sample(func() bool { return socketHolds(c.UDPConn) })
}

// ReceiveQueueDelay is how long the datagrams the listener read since the
// previous call had waited in its UDP socket's receive buffer before it
// read them: the least wait of the datagram at the head of each read
// (the queue that stood throughout), or, when the socket holds datagrams
// and none was read, how long ago the last read was. The node's shedder
// samples it as a queueing delay (docs/OPERATIONS.md, "Overload"); call
// it from one goroutine, every few milliseconds. The first call turns on
// the kernel's arrival stamps. It is 0 where the kernel does not stamp
// datagrams: only Linux (5.0 and later, with UDP_GRO) does here.
func (l *Listener) ReceiveQueueDelay() time.Duration { return l.sock.queueDelay() }
