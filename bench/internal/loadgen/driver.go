package loadgen

import (
	"context"
	"math/rand/v2"
)

// Target is a running server a Driver connects to.
type Target struct {
	Kind    string // "ledge", "nats" or "nats-tls"
	Addr    string // host:port
	CAFile  string // CA certificate of a TLS server
	DataDir string // the server's data directory (Ledge: its admin token)
	// TCPCongestion, when set, is the congestion control of the client's
	// TCP sockets (the WAN run matches quic-go's Cubic).
	TCPCongestion string
}

// Durability is a tier's policy as a driver applies it to the topic or
// stream it creates.
type Durability int

// Durabilities.
const (
	PageCache Durability = iota // T0: acknowledged from the page cache
	Fsync                       // T1: acknowledged after fsync
)

// Driver is a connection to one system under test.
type Driver interface {
	// Prepare creates what a cell writes to: one topic of n partitions
	// (Ledge) or n streams (JetStream), at durability d where the
	// system sets durability per topic.
	Prepare(ctx context.Context, partitions int, d Durability) error
	// Producer returns a producer on its own connection that writes to
	// partition (or stream) i with at most window messages in flight.
	Producer(ctx context.Context, i, window int) (Producer, error)
	// SharedProducers returns n producers on one new connection, producer
	// i writing to partition (or stream) i: for Ledge one QUIC connection
	// whose partitions are independent streams, for JetStream one TCP
	// connection.
	SharedProducers(ctx context.Context, n, window int) ([]Producer, error)
	// Reader returns a reader of partition (or stream) i from its start.
	Reader(ctx context.Context, i int) (Reader, error)
	// Close closes the driver's admin connection.
	Close() error
}

// Producer writes messages to one partition.
type Producer interface {
	// Send writes payload asynchronously and calls done once with the
	// outcome, on a goroutine of the client's. done must not block.
	// Send itself may block on the client's own limits.
	Send(payload []byte, done func(error))
	// SendSync writes payload and waits for its acknowledgement.
	SendSync(ctx context.Context, payload []byte) error
	// Flush waits until everything sent is acknowledged.
	Flush(ctx context.Context) error
	// Close releases the producer and its connection.
	Close() error
}

// Reader reads one partition from its start.
type Reader interface {
	// Read returns the next messages: how many and their payload bytes.
	Read(ctx context.Context) (msgs int, bytes int64, err error)
	// Close releases the reader and its connection.
	Close() error
}

// Payloads are seeded random payloads of one size, cycled through: the
// same bytes for every system, incompressible.
type Payloads struct {
	bufs [][]byte
	next int
}

// NewPayloads makes n payloads of size bytes from seed.
func NewPayloads(seed uint64, size, n int) *Payloads {
	r := rand.New(rand.NewPCG(seed, uint64(size)))
	p := &Payloads{bufs: make([][]byte, n)}
	for i := range p.bufs {
		b := make([]byte, size)
		for j := 0; j < size; j += 8 {
			v := r.Uint64()
			for k := 0; k < 8 && j+k < size; k++ {
				b[j+k] = byte(v >> (8 * k))
			}
		}
		p.bufs[i] = b
	}
	return p
}

// Next returns the next payload. Payloads are never modified.
func (p *Payloads) Next() []byte {
	b := p.bufs[p.next]
	p.next++
	if p.next == len(p.bufs) {
		p.next = 0
	}
	return b
}
