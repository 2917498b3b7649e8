package natsclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ledgemq/ledge/bench/internal/loadgen"
	"github.com/ledgemq/ledge/bench/internal/wan"
	lquic "github.com/ledgemq/ledge/transport/quic"
)

// ReplayPullMessages is how many messages the replaying consumer asks
// for at a time: about 4 MiB of 1 KiB messages, like a Ledge poll.
const ReplayPullMessages = 4096

// ReplayPullBytes bounds a pull in bytes too: 4096 messages of 64 KiB
// are 256 MiB, four times the server's default of pending data for a
// client (64 MiB), and the server closed the connection mid-replay in
// every 64 KiB run. 16 MiB keeps 1 KiB replays at 4096 messages a pull.
const ReplayPullBytes = 16 << 20

// Driver is a connection to a NATS server with JetStream.
type Driver struct {
	t  loadgen.Target
	nc *nats.Conn
	js jetstream.JetStream
}

var _ loadgen.Driver = (*Driver)(nil)

// Dial connects to t (plain when t.CAFile is empty, TLS 1.3 otherwise).
func Dial(ctx context.Context, t loadgen.Target) (*Driver, error) {
	nc, err := connect(t)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Driver{t: t, nc: nc, js: js}, nil
}

func connect(t loadgen.Target) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("ledge-bench"), nats.NoReconnect(), nats.Timeout(10 * time.Second)}
	url := "nats://" + t.Addr
	if t.CAFile != "" {
		pool, err := lquic.LoadCAPool(t.CAFile)
		if err != nil {
			return nil, err
		}
		url = "tls://" + t.Addr
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}))
	}
	if t.TCPCongestion != "" {
		opts = append(opts, nats.SetCustomDialer(&net.Dialer{Timeout: 10 * time.Second,
			Control: wan.TCPCongestionControl(t.TCPCongestion)}))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("natsclient: connect %s: %w", url, err)
	}
	return nc, nil
}

func streamName(i int) string { return fmt.Sprintf("BENCH%d", i) }
func subject(i int) string    { return fmt.Sprintf("bench.%d", i) }

// Prepare creates n file-backed streams of one replica with no limits,
// stream i holding subject bench.i and the tagged subjects bench.i.<tag>.
// Durability is the server's (sync_interval), so d is not used here.
func (d *Driver) Prepare(ctx context.Context, n int, _ loadgen.Durability) error {
	for i := range n {
		_, err := d.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:      streamName(i),
			Subjects:  []string{subject(i), subject(i) + ".>"},
			Storage:   jetstream.FileStorage,
			Replicas:  1,
			Retention: jetstream.LimitsPolicy,
			Discard:   jetstream.DiscardOld,
			MaxMsgs:   -1,
			MaxBytes:  -1,
		})
		if err != nil {
			return fmt.Errorf("natsclient: create stream %s: %w", streamName(i), err)
		}
	}
	return nil
}

// Close closes the admin connection.
func (d *Driver) Close() error {
	d.nc.Close()
	return nil
}

// Producer publishes to stream i on a connection of its own.
func (d *Driver) Producer(ctx context.Context, i, window int) (loadgen.Producer, error) {
	nc, err := connect(d.t)
	if err != nil {
		return nil, err
	}
	p, err := newProducer(&sharedConn{nc: nc, refs: 1}, i, window)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return p, nil
}

// SharedProducers returns n publishers on one connection, each with a
// JetStream context (and so an async-ack inbox) of its own.
func (d *Driver) SharedProducers(ctx context.Context, n, window int) ([]loadgen.Producer, error) {
	nc, err := connect(d.t)
	if err != nil {
		return nil, err
	}
	conn := &sharedConn{nc: nc, refs: n}
	out := make([]loadgen.Producer, 0, n)
	for i := range n {
		p, err := newProducer(conn, i, window)
		if err != nil {
			nc.Close()
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// sharedConn closes the connection when its last producer closes.
type sharedConn struct {
	mu   sync.Mutex
	nc   *nats.Conn
	refs int
}

func (s *sharedConn) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs--; s.refs == 0 {
		s.nc.Close()
	}
}

func newProducer(conn *sharedConn, i, window int) (*producer, error) {
	p := &producer{conn: conn, subj: subject(i), pending: make(map[*nats.Msg]func(error), window)}
	js, err := jetstream.New(conn.nc,
		jetstream.WithPublishAsyncMaxPending(window),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { p.finish(m, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { p.finish(m, err) }),
	)
	if err != nil {
		return nil, err
	}
	p.js = js
	return p, nil
}

type producer struct {
	conn    *sharedConn
	js      jetstream.JetStream
	subj    string
	mu      sync.Mutex
	pending map[*nats.Msg]func(error)
}

func (p *producer) Send(payload []byte, done func(error)) {
	p.publish(&nats.Msg{Subject: p.subj, Data: payload}, done)
}

func (p *producer) publish(m *nats.Msg, done func(error)) {
	p.mu.Lock()
	p.pending[m] = done
	p.mu.Unlock()
	if _, err := p.js.PublishMsgAsync(m); err != nil {
		p.finish(m, err)
	}
}

// SendTagged publishes to the stream's subject for tag (bench.0.s3): a
// JetStream consumer filters by subject, not by content.
func (p *producer) SendTagged(payload []byte, tag string, done func(error)) {
	p.publish(&nats.Msg{Subject: p.subj + "." + tag, Data: payload}, done)
}

func (p *producer) finish(m *nats.Msg, err error) {
	p.mu.Lock()
	done := p.pending[m]
	delete(p.pending, m)
	p.mu.Unlock()
	if done != nil {
		done(err)
	}
}

func (p *producer) SendSync(ctx context.Context, payload []byte) error {
	_, err := p.js.Publish(ctx, p.subj, payload)
	return err
}

func (p *producer) Flush(ctx context.Context) error {
	select {
	case <-p.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (p *producer) Close() error {
	p.conn.release()
	return nil
}

// Reader replays stream i from its first message with an ordered
// consumer on a connection of its own; with keep set, the consumer is
// filtered to the subject of that tag (the server skips the others).
func (d *Driver) Reader(ctx context.Context, i int, keep string) (loadgen.Reader, error) {
	nc, err := connect(d.t)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if keep != "" {
		cfg.FilterSubjects = []string{subject(i) + "." + keep}
	}
	cons, err := js.OrderedConsumer(ctx, streamName(i), cfg)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("natsclient: ordered consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(ReplayPullMessages, ReplayPullBytes))
	if err != nil {
		nc.Close()
		return nil, err
	}
	// Next has no context: ending ctx stops the iterator instead.
	stop := context.AfterFunc(ctx, it.Stop)
	return &reader{nc: nc, it: it, stop: stop}, nil
}

type reader struct {
	nc   *nats.Conn
	it   jetstream.MessagesContext
	stop func() bool
}

// Read returns one message: the iterator hands them out one by one from
// its buffer of pulled messages.
func (r *reader) Read(ctx context.Context) (int, int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	m, err := r.it.Next()
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) && ctx.Err() != nil {
			return 0, 0, context.Cause(ctx)
		}
		return 0, 0, err
	}
	return 1, int64(len(m.Data())), nil
}

func (r *reader) Close() error {
	r.stop()
	r.it.Stop()
	r.nc.Close()
	return nil
}
