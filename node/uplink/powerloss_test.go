package uplink_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/internal/sim"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/record"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	uplinkPowerSeeds = flag.Int("uplink-power-seeds", 6, "seeds of TestUplinkPowerLoss (each a random schedule of produces, forwarding steps and power losses)")
	uplinkPowerSeed  = flag.Int("uplink-power-seed", -1, "run TestUplinkPowerLoss for this seed only, with its trace")
)

const powerKafkaTopic = "central"

// powerWorld is a node's storage (the engine and an owner) on the
// simulator's crashable disk, a forwarder to a kfake cluster, and what was
// produced.
type powerWorld struct {
	t     *testing.T
	rng   *rand.Rand
	disk  *sim.Disk
	kafka *kfake.Cluster
	cfg   engine.TopicConfig

	eng   *engine.Engine
	topic fence.TopicID
	owner *owner.Owner
	fwd   *uplink.Forwarder

	next  int             // the next value's number
	sent  map[string]bool // every value produced, acknowledged or not
	acked []string        // values acknowledged durable, in order

	// dead: the process lost power; Kafka hears nothing more from it.
	// killAtCommit: the next transaction commit of the forwarder (EndTxn)
	// is where the power fails.
	dead, killAtCommit atomic.Bool
	losses             int
	logger             *slog.Logger
	trace              traceBuf // what happened, shown when the seed fails
}

func newPowerWorld(t *testing.T, seed uint64) *powerWorld {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, powerKafkaTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := &powerWorld{t: t, rng: rand.New(rand.NewPCG(seed, 0x0b)), disk: sim.NewDisk(), kafka: c, sent: map[string]bool{},
		logger: slog.New(slog.DiscardHandler)}
	w.logger = slog.New(slog.NewTextHandler(&w.trace, nil))
	t.Cleanup(func() {
		if t.Failed() || *uplinkPowerSeed >= 0 {
			t.Logf("trace:\n%s", w.trace.String())
		}
	})
	w.cfg = engine.TopicConfig{Partitions: 1, Durability: engine.DurabilityAlways, SegmentBytes: 4 << 10}
	if w.rng.IntN(2) == 0 {
		// Acknowledged before durable: a power loss may take records the
		// forwarder already forwarded (a lossy recovery).
		w.cfg.Durability, w.cfg.SyncInterval = engine.DurabilityInterval, time.Millisecond
	}
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if w.dead.Load() {
			return nil, errors.New("the node lost power"), true
		}
		if req.Key() == kmsg.EndTxn.Int16() && w.killAtCommit.CompareAndSwap(true, false) {
			w.dead.Store(true)
			w.disk.Kill()
			return nil, errors.New("the node lost power"), true
		}
		return nil, nil, false
	})
	w.open(true)
	// The last process of the seed stops; without this every seed's
	// engine, forwarder and disk would stay alive to the end of the run.
	t.Cleanup(func() {
		w.fwd.Close()
		_ = w.eng.Close()
	})
	return w
}

// open starts the process: the engine on the disk, the owner, a forwarder.
func (w *powerWorld) open(create bool) {
	w.t.Helper()
	e, err := engine.Open(engine.Options{FS: w.disk.FS(), Dir: "data", ReservedBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		w.t.Fatalf("open after %d power losses: %v", w.losses, err)
	}
	w.eng = e
	var t *engine.Topic
	if create {
		t, err = e.CreateTopic("events", w.cfg)
	} else {
		t, err = e.Topic("events")
	}
	if err != nil {
		w.t.Fatal(err)
	}
	p, err := t.Partition(0)
	if err != nil {
		w.t.Fatal(err)
	}
	w.topic = t.ID()
	w.owner, err = owner.NewOwner(owner.OwnerConfig{Topic: t.ID(), Log: owner.NewEngineLog(p), Meta: owner.NewEngineMetadata(e)})
	if err != nil {
		w.t.Fatal(err)
	}
	w.fwd, err = uplink.NewForwarder(uplink.Config{
		NodeID: "edge-1", TopicID: t.ID(), Topic: "events", Source: w.owner,
		Seeds: w.kafka.ListenAddrs(), To: powerKafkaTopic,
		KafkaOpts: []kgo.Opt{
			kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }),
			kgo.RequestRetries(2), kgo.RecordRetries(2),
		},
		MaxTxnBytes: 1 << 10, PollWait: time.Millisecond, StepTimeout: 5 * time.Second,
		Wait:   func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		Logger: w.logger,
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// batch builds k records of new values.
func (w *powerWorld) batch(k int) ([]byte, []string) {
	var b record.BatchBuilder
	var vals []string
	for range k {
		v := fmt.Sprintf("v%d", w.next)
		w.next++
		w.sent[v] = true
		vals = append(vals, v)
		b.Append(record.Record{Timestamp: 1_700_000_000_000 + int64(w.next), Value: []byte(v)})
	}
	out, err := b.Build(record.CompressionNone)
	if err != nil {
		w.t.Fatal(err)
	}
	return out, vals
}

// produce appends k records and waits for the acknowledgement. Under the
// always policy an acknowledged record is durable.
func (w *powerWorld) produce(k int) {
	w.t.Helper()
	b, vals := w.batch(k)
	res, err := w.owner.Produce(context.Background(), b)
	if err != nil {
		w.t.Fatalf("produce: %v", err)
	}
	w.trace.printf("produce %s..%s at %d..%d, acknowledged", vals[0], vals[len(vals)-1], res.Base, res.Last)
	if w.cfg.Durability == engine.DurabilityAlways {
		w.acked = append(w.acked, vals...)
	}
}

// produceUnacked appends k records without waiting for durability: the
// power may fail before they are.
func (w *powerWorld) produceUnacked(k int) {
	w.t.Helper()
	b, vals := w.batch(k)
	res, _, err := w.owner.OrderProduce(context.Background(), b)
	if err != nil {
		w.t.Fatalf("produce: %v", err)
	}
	w.trace.printf("produce %s..%s at %d..%d, not waiting", vals[0], vals[len(vals)-1], res.Base, res.Last)
}

// step runs one forwarding step; failures are the outage's or the power
// loss's, and the next step retries.
func (w *powerWorld) step() error {
	n, err := w.fwd.Step(context.Background())
	w.trace.printf("step: %d records, err %v; position %d, partition %+v", n, err, w.fwd.Status().Position, w.owner.State())
	return err
}

// powerLoss cuts the power (unless a commit already did), then restarts
// the node on what the disk kept.
func (w *powerWorld) powerLoss() {
	w.t.Helper()
	w.dead.Store(true)
	w.disk.Kill()
	w.fwd.Close()
	_ = w.eng.Close() // the process is dead: nothing reaches the disk
	if err := w.disk.PowerLoss(w.rng, w.rng.IntN(101), 20); err != nil {
		w.t.Fatal(err)
	}
	w.losses++
	w.dead.Store(false)
	w.open(false)
	w.trace.printf("power loss %d: partition %+v, lineage %+v", w.losses, w.owner.State(), w.owner.Lineage())
}

// drain forwards until the forwarder's position reaches the high
// watermark.
func (w *powerWorld) drain() {
	w.t.Helper()
	for steps := 0; ; steps++ {
		if s := w.fwd.Status(); s.Known && s.Position >= w.owner.State().HighWatermark {
			return
		}
		if steps > 1000 {
			w.t.Fatalf("no progress: %+v", w.fwd.Status())
		}
		if err := w.step(); err != nil && steps > 100 {
			w.t.Fatalf("step: %v", err)
		}
	}
}

// ledgeValues reads the partition from its start.
func (w *powerWorld) ledgeValues() []string {
	w.t.Helper()
	var out []string
	for from := w.owner.State().LogStart; from < w.owner.State().HighWatermark; {
		res, err := w.owner.Poll(context.Background(), owner.PollRequest{From: owner.FromOffset, Offset: from})
		if err != nil {
			w.t.Fatal(err)
		}
		for _, b := range res.Batches {
			var it record.RecordIterator
			if err := it.Reset(b, len(b)); err != nil {
				w.t.Fatal(err)
			}
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				if r.Offset >= from {
					out = append(out, string(r.Value))
					w.trace.printf("ledge %d %s", r.Offset, r.Value)
				}
			}
		}
		from = res.Next
	}
	return out
}

// kafkaValues reads the Kafka topic read_committed, up to an end marker.
func (w *powerWorld) kafkaValues() []string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	marker, err := kgo.NewClient(kgo.SeedBrokers(w.kafka.ListenAddrs()...))
	if err != nil {
		w.t.Fatal(err)
	}
	defer marker.Close()
	if err := marker.ProduceSync(ctx, &kgo.Record{Topic: powerKafkaTopic, Value: []byte("end")}).FirstErr(); err != nil {
		w.t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.kafka.ListenAddrs()...), kgo.ConsumeTopics(powerKafkaTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		w.t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			w.t.Fatalf("reading Kafka back: %v", ctx.Err())
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				done = true
			} else if !done {
				out = append(out, string(r.Value))
				w.trace.printf("kafka %s %s", r.Headers[len(r.Headers)-1].Value, r.Value)
			}
		})
		if done {
			return out
		}
	}
}

// TestUplinkPowerLoss: the node's storage runs on the simulator's
// crashable disk; schedules of produces, forwarding steps and power
// losses (at random points, and in the middle of a Kafka transaction,
// between adding the records and the position and committing them) are
// drawn per seed. After the last restart and a drain, a read_committed
// consumer sees every record the partition holds exactly once and in
// order, every record acknowledged as durable among them, and nothing
// twice. Under the interval policy a power loss may take records that
// were already forwarded: Kafka keeps them (once), and the records the
// new history puts at their offsets are forwarded too.
//
//	go test ./node/uplink -run TestUplinkPowerLoss -uplink-power-seeds 200
//
// covers: G46
func TestUplinkPowerLoss(t *testing.T) {
	for seed := range uint64(*uplinkPowerSeeds) {
		if *uplinkPowerSeed >= 0 && seed != uint64(*uplinkPowerSeed) {
			continue
		}
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			w := newPowerWorld(t, seed)
			midTxn := 0
			for op := range 40 {
				switch r := w.rng.IntN(100); {
				case r < 35:
					w.produce(1 + w.rng.IntN(20))
				case r < 40:
					w.produceUnacked(1 + w.rng.IntN(20))
				case r < 80:
					_ = w.step()
				case r < 90 || op == 39 && midTxn == 0:
					// The power fails as the forwarder commits: records
					// and position are in an open transaction.
					// A step may fail before it commits (Kafka refused a
					// produce after an earlier loss, say), as a forwarder's
					// step may; the forwarder steps again, and so does this.
					w.produce(1 + w.rng.IntN(20))
					w.killAtCommit.Store(true)
					var err error
					for try := 0; try < 5 && w.killAtCommit.Load(); try++ {
						err = w.step()
					}
					if w.killAtCommit.Swap(false) {
						t.Fatalf("five steps committed nothing (last err %v)", err)
					}
					midTxn++
					w.powerLoss()
				default:
					w.powerLoss()
				}
			}
			// A last acknowledged batch: under the always policy readers see
			// durable records only, and everything before it is durable now.
			w.produce(1)
			w.drain()
			ledge, kafka := w.ledgeValues(), w.kafkaValues()
			checkPowerLoss(t, w, ledge, kafka)
			t.Logf("%v: %d records sent, %d acknowledged durable, %d in the partition, %d in Kafka; %d power losses (%d mid-transaction)",
				w.cfg.Durability, len(w.sent), len(w.acked), len(ledge), len(kafka), w.losses, midTxn)
		})
	}
}

func checkPowerLoss(t *testing.T, w *powerWorld, ledge, kafka []string) {
	t.Helper()
	at := map[string]int{}
	for i, v := range kafka {
		if j, dup := at[v]; dup {
			t.Fatalf("%s is in Kafka twice (at %d and %d)", v, j, i)
		}
		if !w.sent[v] {
			t.Fatalf("Kafka holds %q, which was never produced", v)
		}
		at[v] = i
	}
	last := -1
	for _, v := range ledge {
		i, ok := at[v]
		if !ok {
			t.Fatalf("%s is in the partition but not in Kafka (partition %+v, lineage %+v)", v, w.owner.State(), w.owner.Lineage())
		}
		if i < last {
			t.Fatalf("%s is in Kafka out of the partition's order", v)
		}
		last = i
	}
	for _, v := range w.acked {
		if !slices.Contains(ledge, v) {
			t.Fatalf("%s was acknowledged durable and is gone from the partition", v)
		}
	}
}

// traceBuf collects a seed's trace.
type traceBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (t *traceBuf) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.Write(p)
}

func (t *traceBuf) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(&t.b, format+"\n", args...)
}

func (t *traceBuf) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
