package ledgeclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/ledgemq/ledge/bench/internal/loadgen"
	"github.com/ledgemq/ledge/sdk"
)

// Producer and consumer settings, printed with the results.
const (
	Topic           = "bench"
	BatchRecords    = sdk.DefaultMaxBatchRecords // records per batch at most
	Linger          = 0                          // a batch leaves as soon as the window has room
	PollMaxBytes    = 4 << 20                    // bytes per poll at most
	PollMaxMessages = sdk.DefaultMaxMessages     // records per poll at most
)

// Driver is a connection to a Ledge node.
type Driver struct {
	t loadgen.Target
	c *sdk.Client
}

var _ loadgen.Driver = (*Driver)(nil)

// Dial connects to t with the CA and admin token of its data directory.
func Dial(ctx context.Context, t loadgen.Target) (*Driver, error) {
	c, err := dial(ctx, t)
	if err != nil {
		return nil, err
	}
	return &Driver{t: t, c: c}, nil
}

func dial(ctx context.Context, t loadgen.Target) (*sdk.Client, error) {
	c, err := sdk.Dial(ctx, t.Addr, sdk.WithDataDir(t.DataDir))
	if err != nil {
		return nil, fmt.Errorf("ledgeclient: dial %s: %w", t.Addr, err)
	}
	return c, nil
}

// Prepare creates the topic with n partitions, uncompressed, at durability
// none (T0) or always (T1).
func (d *Driver) Prepare(ctx context.Context, n int, dur loadgen.Durability) error {
	pol := sdk.DurabilityNone
	if dur == loadgen.Fsync {
		pol = sdk.DurabilityAlways
	}
	_, err := d.c.CreateTopic(ctx, Topic, sdk.TopicConfig{Partitions: n, Durability: pol, Compression: sdk.CompressionNone})
	if err != nil {
		return fmt.Errorf("ledgeclient: create topic: %w", err)
	}
	return nil
}

// Close closes the admin connection.
func (d *Driver) Close() error { return d.c.Close() }

// Producer writes to partition i on a connection of its own.
func (d *Driver) Producer(ctx context.Context, i, window int) (loadgen.Producer, error) {
	ps, err := d.SharedProducers(ctx, 1, window)
	if err != nil {
		return nil, err
	}
	ps[0].(*producer).part = int32(i)
	return ps[0], nil
}

// SharedProducers returns n producers on one connection, each an SDK
// producer of its own writing to partition i.
func (d *Driver) SharedProducers(ctx context.Context, n, window int) ([]loadgen.Producer, error) {
	c, err := dial(ctx, d.t)
	if err != nil {
		return nil, err
	}
	conn := &sharedConn{c: c, refs: n}
	out := make([]loadgen.Producer, 0, n)
	for i := range n {
		p, err := c.NewProducer(ctx, Topic,
			sdk.WithPartitioner(sdk.ManualPartitioner()),
			sdk.WithMaxInFlight(window),
			sdk.WithMaxBatchRecords(BatchRecords),
			sdk.WithLinger(Linger),
			sdk.WithCompression(sdk.CompressionNone),
		)
		if err != nil {
			for _, q := range out {
				q.Close()
			}
			c.Close()
			return nil, fmt.Errorf("ledgeclient: producer: %w", err)
		}
		out = append(out, &producer{conn: conn, p: p, part: int32(i), ctx: context.WithoutCancel(ctx)})
	}
	return out, nil
}

// sharedConn closes the client when its last producer closes.
type sharedConn struct {
	mu   sync.Mutex
	c    *sdk.Client
	refs int
}

func (s *sharedConn) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs--; s.refs == 0 {
		return s.c.Close()
	}
	return nil
}

type producer struct {
	conn *sharedConn
	p    *sdk.Producer
	part int32
	ctx  context.Context
}

func (p *producer) Send(payload []byte, done func(error)) {
	p.p.Produce(p.ctx, &sdk.Record{Partition: p.part, Value: payload}, func(_ *sdk.Record, err error) { done(err) })
}

// SendTagged is Send: the tag is in the JSON payload, where the node's
// filter reads it.
func (p *producer) SendTagged(payload []byte, _ string, done func(error)) { p.Send(payload, done) }

func (p *producer) SendSync(ctx context.Context, payload []byte) error {
	ch := make(chan error, 1)
	p.p.Produce(ctx, &sdk.Record{Partition: p.part, Value: payload}, func(_ *sdk.Record, err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (p *producer) Flush(ctx context.Context) error { return p.p.Flush(ctx) }

func (p *producer) Close() error {
	err := p.p.Close(p.ctx)
	if cerr := p.conn.release(); err == nil {
		err = cerr
	}
	return err
}

// FilterName is the name the filter plugin is added under.
const FilterName = "bench-site"

// Reader replays partition i from its start on a connection of its own.
// With keep set it first adds the filter plugin (t.FilterPlugin) to the
// node, and its polls run it: the node reads the whole log and sends the
// messages whose JSON "site" is keep.
func (d *Driver) Reader(ctx context.Context, i int, keep string) (loadgen.Reader, error) {
	opts := []sdk.ConsumerOption{
		sdk.WithPartitions(int32(i)),
		sdk.WithStart(sdk.AtFirst()),
		sdk.WithMaxBytes(PollMaxBytes),
		sdk.WithMaxMessages(PollMaxMessages),
	}
	if keep != "" {
		if err := d.addFilter(ctx); err != nil {
			return nil, err
		}
		opts = append(opts, sdk.WithFilter(FilterName, map[string]string{"field": "site", "equals": keep}))
	}
	c, err := dial(ctx, d.t)
	if err != nil {
		return nil, err
	}
	cons, err := c.NewConsumer(ctx, Topic, opts...)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ledgeclient: consumer: %w", err)
	}
	return &reader{c: c, cons: cons}, nil
}

// addFilter adds the filter plugin; the node compiles it before it
// answers, so no poll waits for that.
func (d *Driver) addFilter(ctx context.Context) error {
	if d.t.FilterPlugin == "" {
		return errors.New("ledgeclient: a filtered reader needs the filter plugin's module (Target.FilterPlugin)")
	}
	wasm, err := os.ReadFile(d.t.FilterPlugin)
	if err != nil {
		return fmt.Errorf("ledgeclient: filter plugin: %w", err)
	}
	if _, err := d.c.AddPlugin(ctx, FilterName, sdk.PluginFilter, wasm); err != nil {
		return fmt.Errorf("ledgeclient: add the filter plugin: %w", err)
	}
	return nil
}

type reader struct {
	c    *sdk.Client
	cons *sdk.Consumer
}

func (r *reader) Read(ctx context.Context) (int, int64, error) {
	recs, err := r.cons.Poll(ctx)
	var b int64
	for _, rec := range recs {
		b += int64(len(rec.Value))
	}
	// What a consumer at this rate does: it is done with the records, so
	// the next replies are read into their buffer.
	sdk.Recycle(recs)
	return len(recs), b, err
}

func (r *reader) Close() error {
	err := r.cons.Close(context.Background())
	if cerr := r.c.Close(); err == nil {
		err = cerr
	}
	return err
}
