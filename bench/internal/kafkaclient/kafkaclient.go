package kafkaclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/ledgemq/ledge/bench/internal/ledgeclient"
	"github.com/ledgemq/ledge/bench/internal/loadgen"
)

// Producer settings, printed with the results: batches of at most
// ledgeclient.BatchRecords records of the run's size, as the SDK's, no
// linger, no compression, idempotent (franz-go's default, with its at
// most 5 produce requests in flight per broker).
const (
	// batchOverhead bounds a v2 batch's header and a record's framing
	// beyond its value, so that a batch holds BatchRecords records.
	batchHeader    = 61
	recordOverhead = 16
)

// Driver is a Ledge node's Kafka listener, with an SDK connection for
// the topic's creation.
type Driver struct {
	admin  *ledgeclient.Driver
	addr   string
	secret string
	// RecordSize is the payload size of the run, which sizes batches
	// to ledgeclient.BatchRecords records. Default 1 KiB.
	RecordSize int
}

var _ loadgen.Driver = (*Driver)(nil)

// Dial connects to t (its Addr over QUIC, its KafkaAddr for producers)
// with the admin token of its data directory, which is also the SASL/PLAIN
// password.
func Dial(ctx context.Context, t loadgen.Target) (*Driver, error) {
	if t.KafkaAddr == "" {
		return nil, errors.New("kafkaclient: the node has no Kafka listener")
	}
	b, err := os.ReadFile(filepath.Join(t.DataDir, "admin.token"))
	if err != nil {
		return nil, fmt.Errorf("kafkaclient: %w", err)
	}
	admin, err := ledgeclient.Dial(ctx, t)
	if err != nil {
		return nil, err
	}
	return &Driver{admin: admin, addr: t.KafkaAddr, secret: strings.TrimSpace(string(b)), RecordSize: 1 << 10}, nil
}

// Prepare creates the topic over QUIC, as the SDK's column does.
func (d *Driver) Prepare(ctx context.Context, n int, dur loadgen.Durability) error {
	return d.admin.Prepare(ctx, n, dur)
}

// Close closes the admin connection.
func (d *Driver) Close() error { return d.admin.Close() }

// Producer writes to partition i with a client of its own.
func (d *Driver) Producer(ctx context.Context, i, window int) (loadgen.Producer, error) {
	ps, err := d.SharedProducers(ctx, 1, window)
	if err != nil {
		return nil, err
	}
	ps[0].(*producer).part = int32(i)
	return ps[0], nil
}

// SharedProducers returns n producers of one client (one connection to
// the node), producer i writing to partition i.
func (d *Driver) SharedProducers(ctx context.Context, n, window int) ([]loadgen.Producer, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(d.addr),
		kgo.SASL(plain.Auth{User: "bench", Pass: d.secret}.AsMechanism()),
		kgo.DefaultProduceTopic(ledgeclient.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(int32(batchHeader+ledgeclient.BatchRecords*(d.RecordSize+recordOverhead))),
		kgo.MaxBufferedRecords(max(window, 1)),
	)
	if err != nil {
		return nil, fmt.Errorf("kafkaclient: %w", err)
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafkaclient: %w", err)
	}
	shared := &sharedClient{cl: cl, refs: n}
	out := make([]loadgen.Producer, n)
	for i := range n {
		out[i] = &producer{c: shared, part: int32(i), ctx: context.WithoutCancel(ctx)}
	}
	return out, nil
}

// Reader is not measured through Kafka.
func (d *Driver) Reader(context.Context, int, string) (loadgen.Reader, error) {
	return nil, errors.New("kafkaclient: replays are not measured through the Kafka listener")
}

// sharedClient closes the client when its last producer closes.
type sharedClient struct {
	mu   sync.Mutex
	cl   *kgo.Client
	refs int
}

func (s *sharedClient) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs--; s.refs == 0 {
		s.cl.Close()
	}
}

type producer struct {
	c    *sharedClient
	part int32
	ctx  context.Context
}

func (p *producer) Send(payload []byte, done func(error)) {
	p.c.cl.Produce(p.ctx, &kgo.Record{Partition: p.part, Value: payload}, func(_ *kgo.Record, err error) { done(err) })
}

// SendTagged is Send: the tag is in the JSON payload.
func (p *producer) SendTagged(payload []byte, _ string, done func(error)) { p.Send(payload, done) }

func (p *producer) SendSync(ctx context.Context, payload []byte) error {
	return p.c.cl.ProduceSync(ctx, &kgo.Record{Partition: p.part, Value: payload}).FirstErr()
}

func (p *producer) Flush(ctx context.Context) error { return p.c.cl.Flush(ctx) }

func (p *producer) Close() error {
	p.c.release()
	return nil
}
