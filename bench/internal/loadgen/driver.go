package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
)

// Target is a running server a Driver connects to.
type Target struct {
	Kind string // "ledge", "kafka", "nats" or "nats-tls"
	Addr string // host:port
	// KafkaAddr is a Ledge node's Kafka listener (kind "kafka"; Addr is
	// its QUIC listener).
	KafkaAddr string
	CAFile    string // CA certificate of a TLS server
	DataDir   string // the server's data directory (Ledge: its admin token)
	// TCPCongestion, when set, is the congestion control of the client's
	// TCP sockets (the WAN run matches quic-go's Cubic).
	TCPCongestion string
	// FilterPlugin is the WebAssembly filter a Ledge reader that keeps one
	// tag runs on the node (sdk/plugin/examples/jsonfilter).
	FilterPlugin string
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
	// With keep set, the server sends it only the messages tagged keep
	// (see TaggedProducer): Ledge runs a filter plugin over the JSON
	// payload on the node, JetStream filters by subject.
	Reader(ctx context.Context, i int, keep string) (Reader, error)
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

// TaggedProducer sends the messages of a filtered workload: each payload
// is a JSON document naming its tag (NewTaggedPayloads), and a system that
// filters by metadata rather than content carries the tag there too
// (JetStream: in the subject, bench.0.s3).
type TaggedProducer interface {
	Producer
	// SendTagged is Send of a payload tagged tag.
	SendTagged(payload []byte, tag string, done func(error))
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
	tags []string // tags[i] is the tag of bufs[i], for tagged payloads
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
	b, _ := p.NextTagged()
	return b
}

// NextTagged returns the next payload and its tag ("" for payloads that
// are not tagged).
func (p *Payloads) NextTagged() ([]byte, string) {
	b, tag := p.bufs[p.next], ""
	if p.tags != nil {
		tag = p.tags[p.next]
	}
	p.next++
	if p.next == len(p.bufs) {
		p.next = 0
	}
	return b, tag
}

// TagName is the name of tag k of a tagged workload.
func TagName(k int) string { return "s" + strconv.Itoa(k) }

// NewTaggedPayloads makes the payloads of a filtered workload: JSON
// documents of exactly size bytes (at least 64), the i-th sent naming tag
// TagName(i % tags), with seeded random text as their bulk:
//
//	{"seq":5,"site":"s5","data":"Zq3..."}
//
// The i-th message a producer sends carries tag i % tags: a reader that
// keeps one tag of n messages from the start sees ceil(n/tags) of them
// (TaggedCount).
func NewTaggedPayloads(seed uint64, size, tags int) *Payloads {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	r := rand.New(rand.NewPCG(seed, uint64(size)))
	n := 8 * tags
	p := &Payloads{bufs: make([][]byte, n), tags: make([]string, n)}
	for i := range n {
		p.tags[i] = TagName(i % tags)
		b := fmt.Appendf(make([]byte, 0, size), `{"seq":%d,"site":"%s","data":"`, i, p.tags[i])
		for len(b) < size-2 {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		p.bufs[i] = append(b, `"}`...)
	}
	return p
}

// TaggedCount is how many of the first n messages of tagged payloads
// carry tag k.
func TaggedCount(n int64, tags, k int) int64 {
	if n <= int64(k) {
		return 0
	}
	return (n-int64(k)-1)/int64(tags) + 1
}
