package transform

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/internal/sim"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// powerWorld is a node's storage on the simulator's crashable disk: the
// engine, owners of an input and an output topic (durability always), the
// producer registry and a group coordinator, rebuilt from what the disk
// kept after each power loss, as a restarted node is.
type powerWorld struct {
	t    *testing.T
	rng  *rand.Rand
	disk *sim.Disk

	eng     *engine.Engine
	meta    owner.Metadata
	prods   *owner.Producers
	groups  *group.Groups
	owners  map[string]*owner.Owner
	ids     map[string]fence.TopicID
	losses  int
	crashAt int // the runner's append that loses the power (0: none)
	appends int
}

func (w *powerWorld) open(create bool) {
	w.t.Helper()
	e, err := engine.Open(engine.Options{FS: w.disk.FS(), Dir: "data", ReservedBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		w.t.Fatalf("open after %d power losses: %v", w.losses, err)
	}
	w.eng, w.meta = e, owner.NewEngineMetadata(e)
	if w.prods, err = owner.OpenProducers(w.meta); err != nil {
		w.t.Fatal(err)
	}
	w.groups, err = group.OpenGroups(group.GroupsConfig{Meta: w.meta, Topics: group.FuncTopics(
		func(name string) (fence.TopicID, []group.PartitionAssigner, []owner.PartitionLog, bool) {
			o := w.owners[name]
			if o == nil {
				return fence.TopicID{}, nil, nil, false
			}
			p, _ := e.Topic(name)
			part, _ := p.Partition(0)
			return w.ids[name], []group.PartitionAssigner{o}, []owner.PartitionLog{owner.NewEngineLog(part)}, true
		}, func(err error) (wire.Status, string) { return wire.StatusInternal, err.Error() })})
	if err != nil {
		w.t.Fatal(err)
	}
	w.owners, w.ids = map[string]*owner.Owner{}, map[string]fence.TopicID{}
	for _, name := range []string{"in", "out"} {
		var t *engine.Topic
		if create {
			t, err = e.CreateTopic(name, engine.TopicConfig{Partitions: 1, Durability: engine.DurabilityAlways, SegmentBytes: 8 << 10})
		} else {
			t, err = e.Topic(name)
		}
		if err != nil {
			w.t.Fatal(err)
		}
		p, err := t.Partition(0)
		if err != nil {
			w.t.Fatal(err)
		}
		o, err := owner.NewOwner(owner.OwnerConfig{Topic: t.ID(), Log: owner.NewEngineLog(p), Meta: w.meta,
			Producers: w.prods, Members: w.groups})
		if err != nil {
			w.t.Fatal(err)
		}
		w.owners[name], w.ids[name] = o, t.ID()
	}
}

// runner is a new runner of the input partition, as a restarted node's
// member gets it: joined under a new epoch.
func (w *powerWorld) runner(plugin Plugin) *partRunner {
	w.t.Helper()
	spec := Spec{Name: "copy", Plugin: "pass", From: "in", To: "out", FromID: w.ids["in"], ToID: w.ids["out"]}
	asg, err := w.groups.Join(context.Background(), group.JoinRequest{Group: spec.Group(), Member: "copy", Topics: []string{"in"}})
	if err != nil || len(asg.Assignment) != 1 {
		w.t.Fatalf("join: %v %+v", err, asg)
	}
	return &partRunner{spec: spec, in: w.owners["in"], out: &crashingOutput{Partition: w.owners["out"], w: w},
		maxBatch: 1 << 20, plugin: plugin, producers: w.prods, stats: &partStats{},
		consumer: owner.Consumer{Name: spec.Group(), Member: asg.MemberID, MemberEpoch: fence.MemberEpoch(asg.Assignment[0].AssignmentEpoch)}}
}

// crashingOutput cuts the power at the world's chosen append: before it
// reaches the log or just after it is durable.
type crashingOutput struct {
	Partition
	w *powerWorld
}

func (c *crashingOutput) Produce(ctx context.Context, batch []byte) (owner.ProduceResult, error) {
	w := c.w
	w.appends++
	if w.appends != w.crashAt {
		return c.Partition.Produce(ctx, batch)
	}
	if w.rng.IntN(2) == 0 {
		w.disk.Kill()
		return owner.ProduceResult{}, errCrash
	}
	res, err := c.Partition.Produce(ctx, batch)
	w.disk.Kill()
	if err == nil {
		err = errCrash
	}
	return res, err
}

func (w *powerWorld) powerLoss() {
	w.t.Helper()
	w.disk.Kill()
	_ = w.eng.Close()
	if err := w.disk.PowerLoss(w.rng, w.rng.IntN(101), 20); err != nil {
		w.t.Fatal(err)
	}
	w.losses++
	w.open(false)
}

func (w *powerWorld) values(topic string) []string {
	w.t.Helper()
	o := w.owners[topic]
	var out []string
	for off := o.State().LogStart; off < o.State().HighWatermark; {
		res, err := o.Poll(context.Background(), owner.PollRequest{From: owner.FromOffset, Offset: off})
		if err != nil {
			w.t.Fatal(err)
		}
		for _, b := range res.Batches {
			it, err := record.NewRecordIterator(b, 0)
			if err != nil {
				w.t.Fatal(err)
			}
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				if r.Offset >= off && r.Offset < res.Next {
					out = append(out, string(r.Value))
				}
			}
		}
		off = res.Next
	}
	return out
}

// With the output topic's durability always, a transform outputs every
// input record once, in order, however many times the power fails and
// wherever: between steps, after a step's pending write and before its
// append, or just after its append and before its promotion. Each seed
// is a random schedule of inputs, steps and power losses.
//
// covers: G91
func TestPowerLossAnywhereIsExactlyOnce(t *testing.T) {
	for seed := range uint64(24) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := &powerWorld{t: t, rng: rand.New(rand.NewPCG(seed, 0x7f)), disk: sim.NewDisk()}
			w.open(true)
			defer func() { _ = w.eng.Close() }()
			plugin := &fakePlugin{}
			var sent []string
			crashes := 0
			ctx := context.Background()
			produce := func() {
				var b record.BatchBuilder
				for range 1 + w.rng.IntN(20) {
					v := fmt.Sprintf("v%04d", len(sent))
					b.Append(record.Record{Timestamp: 1, Value: []byte(v)})
					sent = append(sent, v)
				}
				batch, err := b.Build(record.CompressionNone)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.owners["in"].Produce(ctx, batch); err != nil {
					t.Fatal(err)
				}
			}
			for round := 0; round < 10; round++ {
				w.appends, w.crashAt = 0, 0
				if w.rng.IntN(3) > 0 {
					w.crashAt = 1 + w.rng.IntN(3)
				}
				r := w.runner(plugin)
				err := r.recover(ctx)
				for moves := w.rng.IntN(12); err == nil && moves > 0; moves-- {
					if w.rng.IntN(2) == 0 {
						produce()
					} else if !r.idle() {
						err = r.step(ctx)
					}
				}
				if err != nil && w.crashAt == 0 {
					t.Fatalf("round %d: %v", round, err)
				}
				if w.crashAt != 0 && w.appends >= w.crashAt {
					crashes++
				}
				w.powerLoss()
			}
			w.crashAt = 0
			r := w.runner(plugin)
			if err := r.recover(ctx); err != nil {
				t.Fatal(err)
			}
			for r.committed < w.owners["in"].State().HighWatermark {
				if err := r.step(ctx); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%d records, %d power losses, %d of them in an append", len(sent), w.losses, crashes)
			if got := w.values("out"); !slices.Equal(got, sent) {
				t.Fatalf("after %d power losses the output holds %d records, want the %d inputs once each in order:\n got %q\nwant %q",
					w.losses, len(got), len(sent), got, sent)
			}
		})
	}
}

// idle reports whether the runner has nothing to do: no step to promote
// and no input past what it committed (a step would wait for records).
func (r *partRunner) idle() bool {
	return r.carry == nil && r.committed >= r.in.State().HighWatermark
}
