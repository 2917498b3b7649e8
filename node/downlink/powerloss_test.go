package downlink_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/internal/sim"
	"github.com/ledgemq/ledge/node/downlink"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/record"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// powerNode is a node's storage (the engine, the owners of a two-partition
// durability always topic, the producer registry) on the simulator's
// crashable disk, with a downlink running into it.
type powerNode struct {
	t      *testing.T
	disk   *sim.Disk
	seeds  []string
	eng    *engine.Engine
	owners []*owner.Owner
	dl     *downlink.Downlink
	cancel context.CancelFunc
	done   chan error
}

func (n *powerNode) open(rng *rand.Rand, create bool) {
	n.t.Helper()
	e, err := engine.Open(engine.Options{FS: n.disk.FS(), Dir: "data", ReservedBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		n.t.Fatal(err)
	}
	n.eng = e
	var t *engine.Topic
	if create {
		t, err = e.CreateTopic("commands", engine.TopicConfig{Partitions: 2, Durability: engine.DurabilityAlways, SegmentBytes: 4 << 10})
	} else {
		t, err = e.Topic("commands")
	}
	if err != nil {
		n.t.Fatal(err)
	}
	meta := owner.NewEngineMetadata(e)
	producers, err := owner.OpenProducers(meta)
	if err != nil {
		n.t.Fatal(err)
	}
	n.owners = n.owners[:0]
	var targets []downlink.Target
	for i := range 2 {
		p, err := t.Partition(i)
		if err != nil {
			n.t.Fatal(err)
		}
		o, err := owner.NewOwner(owner.OwnerConfig{Topic: t.ID(), Partition: uint32(i), Log: owner.NewEngineLog(p), Meta: meta, Producers: producers})
		if err != nil {
			n.t.Fatal(err)
		}
		n.owners = append(n.owners, o)
		targets = append(targets, o)
	}
	n.dl, err = downlink.New(downlink.Config{
		Spec:    downlink.Spec{Topic: "commands", TopicID: t.ID(), Seeds: n.seeds, From: "cloud"},
		Targets: targets, Producers: producers, Meta: meta,
		KafkaOpts: []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond })},
		// Small batches: many appends, so the power fails between and
		// inside them.
		MaxBatchRecords: 1 + rng.IntN(40),
		PollWait:        10 * time.Millisecond,
		Wait:            func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan error, 1)
	go func() { n.done <- n.dl.Run(ctx) }()
}

// records is how many records the local topic holds.
func (n *powerNode) records() int {
	got := 0
	for _, o := range n.owners {
		st := o.State()
		got += int(st.HighWatermark - st.LogStart)
	}
	return got
}

// powerLoss cuts the power while the downlink runs and starts the node
// again on what the disk kept.
func (n *powerNode) powerLoss(rng *rand.Rand) {
	n.t.Helper()
	n.disk.Kill()
	n.cancel()
	<-n.done
	_ = n.eng.Close() // the process is dead: nothing reaches the disk
	if err := n.disk.PowerLoss(rng, rng.IntN(101), 20); err != nil {
		n.t.Fatal(err)
	}
	n.open(rng, false)
}

// values reads local partition p: each record's value and Kafka offset.
func (n *powerNode) values(p int) (vals []string, offsets []int64) {
	n.t.Helper()
	o := n.owners[p]
	var it record.RecordIterator
	for from := o.State().LogStart; from < o.State().HighWatermark; {
		res, err := o.Poll(context.Background(), owner.PollRequest{From: owner.FromOffset, Offset: from})
		if err != nil {
			n.t.Fatal(err)
		}
		for _, b := range res.Batches {
			if err := it.Reset(b, len(b)); err != nil {
				n.t.Fatal(err)
			}
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				if r.Offset < from {
					continue
				}
				vals = append(vals, string(r.Value))
				for _, h := range r.Headers {
					if h.Key == downlink.HeaderKafkaOffset {
						off, _ := strconv.ParseInt(string(h.Value), 10, 64)
						offsets = append(offsets, off)
					}
				}
			}
		}
		from = res.Next
	}
	return vals, offsets
}

// TestDownlinkPowerLoss: the node loses power three times per seed (eight seeds), at random
// points, while a downlink appends 600 records of a two-partition Kafka
// topic to a durability always topic in small batches; every power loss
// takes a random share of what was not synced. After the last restart,
// each Kafka partition's records are in its local partition exactly once
// and in Kafka's order: the position read back from the local partition
// after every power loss was exact.
//
// covers: G84
func TestDownlinkPowerLoss(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xd0))
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "cloud"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			wr, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
			if err != nil {
				t.Fatal(err)
			}
			defer wr.Close()
			const perPartition = 300
			// The cloud writes all along, a few records at a time, so that
			// the power fails while the downlink appends.
			written := make(chan error, 1)
			go func() {
				for i := 0; i < perPartition; i += 10 {
					var recs []*kgo.Record
					for k := range int32(2) {
						for j := i; j < i+10; j++ {
							recs = append(recs, &kgo.Record{Topic: "cloud", Partition: k, Value: fmt.Appendf(nil, "k%d-%d", k, j)})
						}
					}
					if err := wr.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
						written <- err
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
				written <- nil
			}()

			n := &powerNode{t: t, disk: sim.NewDisk(), seeds: c.ListenAddrs()}
			n.open(rng, true)
			for loss := range 3 {
				// Somewhere between what the topic holds and the end: a
				// power loss may also come before the downlink appended
				// anything since the last one (while it starts).
				now := n.records()
				at := now + rng.IntN((2*perPartition-now)/2+1)
				for n.records() < at {
					time.Sleep(100 * time.Microsecond)
				}
				n.powerLoss(rng)
				t.Logf("power loss %d at %d records or more: %d survived", loss+1, at, n.records())
			}
			if err := <-written; err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(time.Minute)
			for n.records() < 2*perPartition {
				if time.Now().After(deadline) {
					t.Fatalf("the local topic holds %d records, want %d: %+v", n.records(), 2*perPartition, n.dl.Status())
				}
				time.Sleep(time.Millisecond)
			}
			n.cancel()
			<-n.done
			for k := range 2 {
				vals, offsets := n.values(k)
				if len(vals) != perPartition {
					t.Fatalf("local partition %d holds %d records, want %d", k, len(vals), perPartition)
				}
				for i, v := range vals {
					if want := fmt.Sprintf("k%d-%d", k, i); v != want || offsets[i] != int64(i) {
						t.Fatalf("local partition %d record %d is %s (Kafka offset %d), want %s at offset %d", k, i, v, offsets[i], want, i)
					}
				}
			}
			_ = n.eng.Close()
		})
	}
}

// TestDownlinkFitsTheTopicsBatchBound: a local topic whose batches are
// bounded below the downlink's default gets its records in smaller
// batches, each record once and in order, rather than a downlink that
// fails its appends forever.
func TestDownlinkFitsTheTopicsBatchBound(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "cloud"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wr, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Close()
	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, &kgo.Record{Topic: "cloud", Value: fmt.Appendf(nil, "%04d-%s", i, make([]byte, 100))})
	}
	if err := wr.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(engine.Options{FS: sim.NewDisk().FS(), Dir: "data", ReservedBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	topic, err := e.CreateTopic("commands", engine.TopicConfig{Partitions: 1, Durability: engine.DurabilityAlways, MaxBatchBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	p, err := topic.Partition(0)
	if err != nil {
		t.Fatal(err)
	}
	meta := owner.NewEngineMetadata(e)
	producers, err := owner.OpenProducers(meta)
	if err != nil {
		t.Fatal(err)
	}
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: topic.ID(), Log: owner.NewEngineLog(p), Meta: meta, Producers: producers})
	if err != nil {
		t.Fatal(err)
	}
	d, err := downlink.New(downlink.Config{
		Spec:    downlink.Spec{Topic: "commands", TopicID: topic.ID(), Seeds: c.ListenAddrs(), From: "cloud"},
		Targets: []downlink.Target{o}, Producers: producers, Meta: meta, PollWait: 10 * time.Millisecond,
		Wait: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for o.State().HighWatermark < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("the local topic holds %d records, want 200: %+v", o.State().HighWatermark, d.Status())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if st := d.Status(); st.Failures != 0 {
		t.Fatalf("the downlink failed %d times (%s), want its batches made to fit", st.Failures, st.LastError)
	}
	n := &powerNode{t: t, owners: []*owner.Owner{o}}
	vals, _ := n.values(0)
	for i, v := range vals {
		if !strings.HasPrefix(v, fmt.Sprintf("%04d-", i)) {
			t.Fatalf("record %d is %.8q", i, v)
		}
	}
	if len(vals) != 200 {
		t.Fatalf("the local topic holds %d records, want 200", len(vals))
	}
}
