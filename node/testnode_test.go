package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// safety bounds every wait of the end-to-end tests. None of them relies on
// it for correctness: it only turns a hang into a failure. It is long
// because compiling a Go plugin under the race detector on a loaded
// machine has taken more than 30 s.
const safety = 2 * time.Minute

func safetyContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	return ctx
}

// testNode is a node on an ephemeral loopback port.
type testNode struct {
	*Node
	store *memStorage // nil when the node runs on the engine
	admin string      // the admin token
}

// startNode opens a node on 127.0.0.1:0 in a temporary data directory,
// on store, or on the storage engine when store is nil.
func startNode(t testing.TB, store *memStorage, tweak func(*Config)) *testNode {
	t.Helper()
	cfg := Config{
		DataDir:           t.TempDir(),
		Listen:            "127.0.0.1:0",
		RetentionInterval: -1,
	}
	if store != nil {
		cfg.Storage = store
	}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := Open(safetyContext(t), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(safetyContext(t)); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	admin, err := os.ReadFile(n.Paths().AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	return &testNode{Node: n, store: store, admin: strings.TrimSpace(string(admin))}
}

// client is a raw protocol client: a QUIC connection and its first
// (authentication) stream, pipelined.
type client struct {
	t    testing.TB
	conn *quic.ClientConn
	main *quic.Pipeline
	ids  atomic.Uint32
}

// dial connects and authenticates with token.
func (tn *testNode) dial(t testing.TB, token string) (*client, error) {
	t.Helper()
	ctx := safetyContext(t)
	tlsConf, err := quic.ClientTLSConfigFromCAFile(tn.Paths().CA, "")
	if err != nil {
		return nil, err
	}
	conn, err := quic.Dial(ctx, tn.Addr(), tlsConf, quic.ClientConfig{})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = conn.Close() })
	s, err := conn.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	c := &client{t: t, conn: conn, main: quic.NewPipeline(s, 64)}
	var rep wire.AuthenticateReply
	if err := c.call(c.main, &wire.AuthenticateRequest{Token: token}, &rep); err != nil {
		return nil, err
	}
	return c, nil
}

// mustDial is dial that fails the test on error.
func (tn *testNode) mustDial(t testing.TB, token string) *client {
	t.Helper()
	c, err := tn.dial(t, token)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return c
}

// stream opens another pipelined stream.
func (c *client) stream() *quic.Pipeline {
	c.t.Helper()
	s, err := c.conn.OpenStream(safetyContext(c.t))
	if err != nil {
		c.t.Fatalf("OpenStream: %v", err)
	}
	return quic.NewPipeline(s, 64)
}

// frame encodes req as a request frame.
func (c *client) frame(req wire.Message) []byte {
	c.t.Helper()
	f, err := wire.AppendRequest(nil, c.ids.Add(1), req)
	if err != nil {
		c.t.Fatalf("encoding %s: %v", req.Kind(), err)
	}
	return f
}

// call sends req on p and decodes the reply into rep. A non-OK status is a
// *wire.Error.
func (c *client) call(p *quic.Pipeline, req, rep wire.Message) error {
	c.t.Helper()
	reply, err := p.Do(safetyContext(c.t), c.frame(req))
	if err != nil {
		return err
	}
	return decodeReply(reply, rep)
}

// mustCall is call on the main stream that fails the test on error.
func (c *client) mustCall(req, rep wire.Message) {
	c.t.Helper()
	if err := c.call(c.main, req, rep); err != nil {
		c.t.Fatalf("%s: %v", req.Kind(), err)
	}
}

// send sends req on p without waiting; the reply arrives on the channel.
func (c *client) send(p *quic.Pipeline, req wire.Message) <-chan reply {
	c.t.Helper()
	ch := make(chan reply, 1)
	if err := p.Send(safetyContext(c.t), c.frame(req), func(b []byte, err error) { ch <- reply{b, err} }); err != nil {
		ch <- reply{nil, err}
	}
	return ch
}

type reply struct {
	frame []byte
	err   error
}

// await waits for a reply sent with send and decodes it into rep.
func await(t testing.TB, ch <-chan reply, rep wire.Message) error {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		return decodeReply(r.frame, rep)
	case <-time.After(safety):
		t.Fatalf("no %s reply within %v", rep.Kind(), safety)
		return nil
	}
}

func decodeReply(b []byte, rep wire.Message) error {
	h, size, err := wire.ParseFrameHeader(b, len(b))
	if err != nil {
		return err
	}
	return wire.DecodeReply(wire.Frame{FrameHeader: h, Body: b[len(b)-size:]}, rep)
}

// statusOf is the wire status of err (StatusOK for nil).
func statusOfErr(err error) wire.Status {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Status
	}
	if err == nil {
		return wire.StatusOK
	}
	return wire.Status(0xFFFF)
}

// createTopic creates a topic with cfg.
func (c *client) createTopic(name string, cfg wire.TopicConfig) wire.TopicInfo {
	c.t.Helper()
	var rep wire.CreateTopicReply
	c.mustCall(&wire.CreateTopicRequest{Name: name, Config: cfg}, &rep)
	return rep.Topic
}

// batch builds a batch of values for producer (id, epoch) at seq (id 0:
// no producer).
func batch(t testing.TB, id uint64, epoch uint32, seq int32, values ...string) []byte {
	t.Helper()
	var b record.BatchBuilder
	if id != 0 {
		b.SetProducer(id, epoch, seq)
	}
	for _, v := range values {
		b.Append(record.Record{Timestamp: 1, Value: []byte(v)})
	}
	out, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// produce appends values to topic/partition and returns the reply.
func (c *client) produce(p *quic.Pipeline, topic string, partition uint32, b []byte) (wire.ProduceReply, error) {
	c.t.Helper()
	var rep wire.ProduceReply
	err := c.call(p, &wire.ProduceRequest{Topic: topic, Partition: partition, Batch: b}, &rep)
	return rep, err
}

// values returns the record values of a poll reply's batches, as
// "offset:value".
func values(t testing.TB, batches []byte) []string {
	t.Helper()
	var out []string
	for len(batches) > 0 {
		b, rest, err := wire.NextBatch(batches)
		if err != nil {
			t.Fatal(err)
		}
		it, err := record.NewRecordIterator(b, record.BatchMaxSize)
		if err != nil {
			t.Fatal(err)
		}
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		batches = rest
	}
	return out
}

// pollOne polls one partition and returns its entry of the reply.
func (c *client) pollOne(p *quic.Pipeline, consumer wire.Consumer, topic string, pos wire.Position, maxWait time.Duration) wire.PollPartitionReply {
	c.t.Helper()
	return c.pollPartition(p, consumer, topic, 0, pos, maxWait)
}

// pollPartition polls partition part of topic.
func (c *client) pollPartition(p *quic.Pipeline, consumer wire.Consumer, topic string, part uint32, pos wire.Position, maxWait time.Duration) wire.PollPartitionReply {
	c.t.Helper()
	var rep wire.PollReply
	err := c.call(p, &wire.PollRequest{
		Consumer: consumer, MaxWait: maxWait,
		Partitions: []wire.PollPartition{{Topic: topic, Partition: part, Position: pos}},
	}, &rep)
	if err != nil {
		c.t.Fatalf("poll: %v", err)
	}
	return rep.Partitions[0]
}

func named(name string, session uint64) wire.Consumer {
	return wire.Consumer{Kind: wire.ConsumerNamed, Name: name, Session: session}
}

func eq(a, b []string) bool {
	return strings.Join(a, "|") == strings.Join(b, "|")
}
