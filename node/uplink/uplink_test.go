package uplink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/internal/syncbuf"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/uplink/uplinktest"
	"github.com/ledgemq/ledge/record"
)

// uplinkWorld is a Ledge topic of a few partitions on the in-memory log and
// a kfake cluster with the target topic.
type uplinkWorld struct {
	t      testing.TB
	kafka  *uplinktest.Kafka
	topic  fence.TopicID
	logs   []*ownertest.Log
	owners []*owner.Owner
	values [][]string // what was produced, per partition
	// compression of the batches produce appends
	compression record.Compression
}

func newUplinkWorld(t testing.TB, partitions int) *uplinkWorld {
	t.Helper()
	w := &uplinkWorld{t: t, kafka: uplinktest.NewKafka(t, partitions), topic: fence.TopicID{0xab, 1}, values: make([][]string, partitions)}
	m := ownertest.NewMeta()
	for i := range partitions {
		l := ownertest.NewLog(m, "p"+strconv.Itoa(i))
		o, err := owner.NewOwner(owner.OwnerConfig{Topic: w.topic, Partition: uint32(i), Log: l, Meta: m})
		if err != nil {
			t.Fatal(err)
		}
		w.logs = append(w.logs, l)
		w.owners = append(w.owners, o)
	}
	return w
}

// produce appends n records to partition p in batches of up to 10.
func (w *uplinkWorld) produce(p, n int) {
	w.t.Helper()
	for n > 0 {
		k := min(n, 10)
		var b record.BatchBuilder
		for range k {
			v := fmt.Sprintf("p%d-%d", p, len(w.values[p]))
			w.values[p] = append(w.values[p], v)
			b.Append(record.Record{Timestamp: 1_700_000_000_000, Key: []byte(v), Value: []byte(v)})
		}
		batch, err := b.Build(w.compression)
		if err != nil {
			w.t.Fatal(err)
		}
		if _, _, err := w.logs[p].Append(batch); err != nil {
			w.t.Fatal(err)
		}
		n -= k
	}
}

func (w *uplinkWorld) forwarder(p int, mod func(*Config)) *Forwarder {
	w.t.Helper()
	cfg := Config{
		NodeID: "edge-1", TopicID: w.topic, Partition: uint32(p), Topic: "events",
		Source: w.owners[p], Seeds: w.kafka.ListenAddrs(), To: uplinktest.Topic,
		KafkaOpts: uplinktest.FastKafka(),
		PollWait:  time.Millisecond,
		// Generous: a step that runs out of it fails the tests that drain
		// without failures, and a loaded machine has taken more than
		// 250 ms for one. The outage test shortens it while Kafka is away.
		StepTimeout: 10 * time.Second,
		Wait:        func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		Logger:      slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&cfg)
	}
	f, err := NewForwarder(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(f.Close)
	return f
}

// drain steps f until its position reaches the partition's high
// watermark, tolerating up to maxFailures failed steps.
func (w *uplinkWorld) drain(f *Forwarder, p, maxFailures int) {
	w.t.Helper()
	ctx := context.Background()
	failures := 0
	for steps := 0; ; steps++ {
		if s := f.Status(); s.Known && s.Position >= w.owners[p].State().HighWatermark {
			return
		}
		if steps > 10_000 {
			w.t.Fatalf("partition %d: no progress: %+v", p, f.Status())
		}
		if _, err := f.Step(ctx); err != nil {
			if failures++; failures > maxFailures {
				w.t.Fatalf("partition %d: step: %v", p, err)
			}
		}
	}
}

// readCommitted reads back what Kafka committed, per partition.
func (w *uplinkWorld) readCommitted() (values [][]string, offsets [][]uint64) {
	w.t.Helper()
	return w.kafka.ReadCommitted(HeaderLedgeOffset)
}

// checkExactlyOnce: what Kafka holds, read committed, is what Ledge holds,
// once each, in order per partition.
func (w *uplinkWorld) checkExactlyOnce(got [][]string) {
	w.t.Helper()
	for p := range w.values {
		if len(got[p]) != len(w.values[p]) {
			w.t.Errorf("partition %d: Kafka holds %d records, Ledge %d", p, len(got[p]), len(w.values[p]))
			continue
		}
		for i := range got[p] {
			if got[p][i] != w.values[p][i] {
				w.t.Errorf("partition %d: record %d is %q, want %q", p, i, got[p][i], w.values[p][i])
				break
			}
		}
	}
}

// TestUplinkForwardsExactlyOnceInOrder: N records per partition arrive in
// Kafka exactly once, in order per partition, with their Ledge offsets,
// over several transactions of several compressed batches each.
//
// covers: G40
func TestUplinkForwardsExactlyOnceInOrder(t *testing.T) {
	w := newUplinkWorld(t, 3)
	w.compression = record.CompressionS2 // several decompressed batches per transaction
	fs := make([]*Forwarder, 3)
	for p := range 3 {
		w.produce(p, 250+p*10)
		fs[p] = w.forwarder(p, func(c *Config) { c.MaxTxnBytes = 2 << 10 })
		w.drain(fs[p], p, 0)
	}
	for p := range 3 { // a second round continues from the committed position
		w.produce(p, 40)
		w.drain(fs[p], p, 0)
	}
	got, offs := w.readCommitted()
	w.checkExactlyOnce(got)
	for p := range offs {
		for i, o := range offs[p] {
			if o != uint64(i) {
				t.Fatalf("partition %d: record %d carries ledge offset %d", p, i, o)
			}
		}
		s := fs[p].Status()
		if s.Forwarded != uint64(len(w.values[p])) || s.LagRecords != 0 || s.Transactions < 2 {
			t.Errorf("partition %d status: %+v", p, s)
		}
	}
}

// TestUplinkRestartReadsPositionFromKafka: a new forwarder (a restarted
// node) resumes at the position committed in Kafka.
//
// covers: G40
func TestUplinkRestartReadsPositionFromKafka(t *testing.T) {
	w := newUplinkWorld(t, 1)
	w.produce(0, 100)
	f := w.forwarder(0, nil)
	w.drain(f, 0, 0)
	f.Close()
	w.produce(0, 30)
	g := w.forwarder(0, nil)
	w.drain(g, 0, 0)
	if s := g.Status(); s.Forwarded != 30 {
		t.Fatalf("restarted forwarder forwarded %d records, want 30 (resumed at the committed position)", s.Forwarded)
	}
	got, _ := w.readCommitted()
	w.checkExactlyOnce(got)
}

var errKilled = errors.New("killed")

// TestUplinkKilledMidTransaction: a forwarder that dies with records and
// position in an open transaction leaves nothing visible; its successor
// aborts the transaction when it initializes the transactional id and
// forwards those records again, exactly once.
//
// covers: G40
func TestUplinkKilledMidTransaction(t *testing.T) {
	w := newUplinkWorld(t, 1)
	w.produce(0, 50)
	ok := w.forwarder(0, nil)
	w.drain(ok, 0, 0)
	ok.Close()

	w.produce(0, 50)
	dying := w.forwarder(0, func(c *Config) { c.beforeCommit = func() error { return errKilled } })
	if _, err := dying.Step(context.Background()); !errors.Is(err, errKilled) {
		t.Fatalf("step: %v, want the injected kill", err)
	}
	// The dying client is abandoned, not closed: its transaction is open.
	restarted := w.forwarder(0, nil)
	w.drain(restarted, 0, 0)
	if s := restarted.Status(); s.Forwarded != 50 {
		t.Fatalf("restarted forwarder forwarded %d, want the 50 of the abandoned transaction", s.Forwarded)
	}
	got, _ := w.readCommitted()
	w.checkExactlyOnce(got)
}

// TestUplinkResumesAfterKafkaOutage: with Kafka refusing every request for
// a while (connections closed), steps fail and back off; once Kafka is
// back, forwarding resumes from the committed position and, under the
// block policy, nothing is lost or duplicated.
//
// covers: G42
func TestUplinkResumesAfterKafkaOutage(t *testing.T) {
	w := newUplinkWorld(t, 1)
	w.produce(0, 40)
	var waits atomic.Int64
	f := w.forwarder(0, func(c *Config) {
		c.MaxTxnBytes = 1 << 10
		c.Wait = func(ctx context.Context, _ time.Duration) error { waits.Add(1); return ctx.Err() }
	})
	w.drain(f, 0, 0)

	w.produce(0, 200)
	if _, err := f.Step(context.Background()); err != nil { // some of the backlog goes through
		t.Fatal(err)
	}
	// A produce that Kafka's refusals keep in retries ends with the step's
	// deadline.
	f.cfg.StepTimeout = 250 * time.Millisecond
	var down atomic.Bool
	down.Store(true)
	refused := w.kafka.RefuseWhile(&down)

	// Kafka comes back after the third backoff; the lag is visible before.
	var lagDuringOutage Status
	f.cfg.Wait = func(ctx context.Context, _ time.Duration) error {
		if waits.Add(1) == 3 {
			lagDuringOutage = f.Status()
			down.Store(false)
		}
		return ctx.Err()
	}
	// Run stops once it asks for records past the high watermark: caught up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hw := w.owners[0].State().HighWatermark
	f.cfg.Source = pollHook{Source: w.owners[0], before: func(req owner.PollRequest) {
		if req.Offset >= hw {
			cancel()
		}
	}}
	if err := f.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	if lagDuringOutage.LagRecords == 0 || lagDuringOutage.Failures < 3 || lagDuringOutage.State != Backoff {
		t.Fatalf("status during the outage: %+v", lagDuringOutage)
	}
	if refused.Load() == 0 || waits.Load() == 0 {
		t.Fatalf("outage not exercised: %d requests refused, %d backoffs", refused.Load(), waits.Load())
	}
	got, _ := w.readCommitted()
	w.checkExactlyOnce(got)
}

// TestUplinkZombieIsFenced: a second forwarder with the same
// transactional id (a restored backup, a stuck old process) fences the
// first by the producer epoch; the first stops, says why, and writes
// nothing more.
//
// covers: G41
func TestUplinkZombieIsFenced(t *testing.T) {
	w := newUplinkWorld(t, 1)
	w.produce(0, 30)
	var logs syncbuf.Buffer
	zombie := w.forwarder(0, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	w.drain(zombie, 0, 0)

	successor := w.forwarder(0, nil)
	w.produce(0, 30)
	w.drain(successor, 0, 0)

	w.produce(0, 10)
	_, err := zombie.Step(context.Background())
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie step: %v, want ErrFenced", err)
	}
	if s := zombie.Status(); s.State != Fenced {
		t.Fatalf("zombie state %v", s.State)
	}
	if !bytes.Contains(logs.Bytes(), []byte("newer producer epoch")) || !bytes.Contains(logs.Bytes(), []byte(zombie.TransactionalID())) {
		t.Fatalf("the log does not say why: %s", logs.Bytes())
	}
	if err := zombie.Run(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie run: %v", err)
	}
	// A step may fail and be retried, as Run retries it: once in about a
	// thousand runs the fake broker answered the successor's first
	// produce after the zombie's refused one with
	// OUT_OF_ORDER_SEQUENCE_NUMBER. What Kafka holds is checked below.
	w.drain(successor, 0, 3)
	got, _ := w.readCommitted()
	w.checkExactlyOnce(got)
}

// pollHook calls before ahead of every poll.
type pollHook struct {
	Source
	before func(owner.PollRequest)
}

func (h pollHook) Poll(ctx context.Context, req owner.PollRequest) (owner.PollResult, error) {
	h.before(req)
	return h.Source.Poll(ctx, req)
}
