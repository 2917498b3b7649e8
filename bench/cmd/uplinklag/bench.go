package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/record"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Records of the runs: batches of 100 records of 1 KiB (random values,
// append-time timestamps, so that one batch is reused and the lag's age
// is measured from the moment of the append).
const (
	perBatch   = 100
	recordSize = 1024
)

// bench is one engine on the work directory and one kfake cluster.
type bench struct {
	c      config
	eng    *engine.Engine
	meta   owner.Metadata
	kafka  *kfake.Cluster
	down   atomic.Bool // Kafka refuses every request
	batch  []byte
	topics int
}

func newBench(c config) (*bench, error) {
	eng, err := engine.Open(engine.Options{FS: vfs.Default, Dir: c.workdir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "forward", "lag"))
	if err != nil {
		_ = eng.Close()
		return nil, err
	}
	b := &bench{c: c, eng: eng, meta: owner.NewEngineMetadata(eng), kafka: kafka}
	kafka.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		kafka.KeepControl()
		if b.down.Load() {
			return nil, errors.New("unreachable"), true
		}
		return nil, nil, false
	})
	var bb record.BatchBuilder
	v := make([]byte, recordSize)
	var x uint64 = 0x9e3779b97f4a7c15
	for range perBatch {
		for j := range v {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			v[j] = byte(x)
		}
		bb.Append(record.Record{Value: append([]byte(nil), v...)})
	}
	if b.batch, err = bb.Build(record.CompressionNone); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *bench) close() {
	b.kafka.Close()
	_ = b.eng.Close()
}

func (b *bench) durability() (engine.Durability, error) {
	switch b.c.durability {
	case "always":
		return engine.DurabilityAlways, nil
	case "interval":
		return engine.DurabilityInterval, nil
	case "none":
		return engine.DurabilityNone, nil
	}
	return 0, fmt.Errorf("durability %q: want always, interval or none", b.c.durability)
}

// owner creates a fresh topic of one partition and returns its owner.
func (b *bench) owner() (*owner.Owner, fence.TopicID, error) {
	d, err := b.durability()
	if err != nil {
		return nil, fence.TopicID{}, err
	}
	b.topics++
	t, err := b.eng.CreateTopic(fmt.Sprintf("t%d", b.topics), engine.TopicConfig{
		Partitions: 1, Durability: d, Timestamps: engine.TimestampAppend,
	})
	if err != nil {
		return nil, fence.TopicID{}, err
	}
	p, err := t.Partition(0)
	if err != nil {
		return nil, fence.TopicID{}, err
	}
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: t.ID(), Log: owner.NewEngineLog(p), Meta: b.meta})
	return o, t.ID(), err
}

// forwarder returns the uplink's forwarder of o to the Kafka topic to.
// Backoff is capped at 1 s (the default 30 s would hide the recovery in a
// short run); a step gives up after 2 s.
func (b *bench) forwarder(o *owner.Owner, id fence.TopicID, to string) (*uplink.Forwarder, error) {
	return uplink.NewForwarder(uplink.Config{
		NodeID: "bench", TopicID: id, Topic: to, Source: o, Seeds: b.kafka.ListenAddrs(), To: to,
		StepTimeout: 2 * time.Second, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
}

func (b *bench) produce(ctx context.Context, o *owner.Owner) error {
	_, err := o.Produce(ctx, append([]byte(nil), b.batch...))
	return err
}

// throughput is a phase's rates.
type throughput struct {
	Seconds        float64 `json:"seconds"`
	ProduceRecords float64 `json:"produce_records_per_second"`
	ProduceMB      float64 `json:"produce_mb_per_second"`
	ForwardRecords float64 `json:"forward_records_per_second,omitempty"`
	ForwardMB      float64 `json:"forward_mb_per_second,omitempty"`
	Transactions   uint64  `json:"transactions,omitempty"`
	LagAtEnd       uint64  `json:"lag_records_at_end,omitempty"`
	// Drain is how long the forwarder took after produce stopped to
	// forward what was left.
	Drain time.Duration `json:"drain_ns,omitempty"`
}

func rate(records uint64, d time.Duration) (perSec, mb float64) {
	s := d.Seconds()
	return float64(records) / s, float64(records) * recordSize / s / 1e6
}

// local produces alone for d.
func (b *bench) local(d time.Duration) (throughput, error) {
	o, _, err := b.owner()
	if err != nil {
		return throughput{}, err
	}
	n, el, err := b.produceFor(context.Background(), o, d)
	if err != nil {
		return throughput{}, err
	}
	t := throughput{Seconds: el.Seconds()}
	t.ProduceRecords, t.ProduceMB = rate(n, el)
	return t, nil
}

// produceFor produces batches to o as fast as it goes for d, and returns
// how many records it produced and how long it took.
func (b *bench) produceFor(ctx context.Context, o *owner.Owner, d time.Duration) (uint64, time.Duration, error) {
	start := time.Now()
	var n uint64
	for time.Since(start) < d {
		if err := b.produce(ctx, o); err != nil {
			return n, time.Since(start), err
		}
		n += perBatch
	}
	return n, time.Since(start), nil
}

// forward produces as fast as it goes for d with the forwarder running,
// then waits for the forwarder to catch up.
func (b *bench) forward(d time.Duration) (throughput, error) {
	o, id, err := b.owner()
	if err != nil {
		return throughput{}, err
	}
	f, err := b.forwarder(o, id, "forward")
	if err != nil {
		return throughput{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	for f.Status().State != uplink.Forwarding { // connected: the position is read
		time.Sleep(time.Millisecond)
	}
	before := f.Status().Forwarded
	n, el, err := b.produceFor(ctx, o, d)
	if err != nil {
		return throughput{}, err
	}
	s := f.Status()
	t := throughput{Seconds: el.Seconds(), LagAtEnd: s.LagRecords}
	t.ProduceRecords, t.ProduceMB = rate(n, el)
	t.ForwardRecords, t.ForwardMB = rate(s.Forwarded-before, el)
	stop := time.Now()
	hw := o.State().HighWatermark
	for f.Status().Position < hw {
		if time.Since(stop) > time.Minute {
			return t, fmt.Errorf("the forwarder did not catch up within a minute: %+v", f.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Drain = time.Since(stop)
	t.Transactions = f.Status().Transactions
	return t, nil
}
