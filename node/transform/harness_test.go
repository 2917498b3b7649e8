package transform

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// world is a node's worth of transform machinery over in-memory logs (or,
// from newEngineWorld, the storage engine's): a metadata store, the
// producer registry, a group coordinator, topics of owners, and a
// transform manager.
type world struct {
	t      testing.TB
	meta   owner.Metadata
	mem    *ownertest.Meta // meta, when the logs are in memory
	eng    *engine.Engine  // the storage engine, when the logs are its
	dura   engine.Durability
	prods  *owner.Producers
	groups *group.Groups
	plugin *fakePlugin
	// wrapOut, when set, wraps the partitions of topic "out" the runners
	// get.
	wrapOut func(p Partition) Partition

	mu     sync.Mutex
	topics map[string]*testTopic
	mgr    *Manager
}

type testTopic struct {
	id     fence.TopicID
	owners []*owner.Owner
	logs   []owner.PartitionLog
}

func newWorld(t testing.TB) *world {
	t.Helper()
	mem := ownertest.NewMeta()
	return openWorld(t, &world{t: t, meta: mem, mem: mem})
}

// newEngineWorld is a world whose topics and metadata are the storage
// engine's, in dir on the real file system, as a node opens them; its
// topics have durability d.
func newEngineWorld(t testing.TB, dir string, d engine.Durability) *world {
	t.Helper()
	e, err := engine.Open(engine.Options{FS: vfs.Default, Dir: dir, ReservedBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return openWorld(t, &world{t: t, meta: owner.NewEngineMetadata(e), eng: e, dura: d})
}

func openWorld(t testing.TB, w *world) *world {
	w.plugin, w.topics = &fakePlugin{}, map[string]*testTopic{}
	var err error
	if w.prods, err = owner.OpenProducers(w.meta); err != nil {
		t.Fatal(err)
	}
	w.groups, err = group.OpenGroups(group.GroupsConfig{Meta: w.meta, Topics: group.FuncTopics(w.lookup,
		func(err error) (wire.Status, string) { return wire.StatusInternal, err.Error() })})
	if err != nil {
		t.Fatal(err)
	}
	w.mgr = w.newManager()
	return w
}

func (w *world) newManager() *Manager {
	return NewManager(ManagerConfig{Meta: w.meta, Groups: w.groups, Producers: w.prods, Plugin: w.plugin,
		Topics: w.topicOf, Backoff: func(int) time.Duration { return 50 * time.Millisecond }})
}

// restart stops the manager, as a crash of the node would stop its
// runners, and starts a new one from what is persisted.
func (w *world) restart() {
	w.t.Helper()
	w.mgr.Close()
	w.mgr = w.newManager()
	if err := w.mgr.Start(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) lookup(name string) (fence.TopicID, []group.PartitionAssigner, []owner.PartitionLog, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tt := w.topics[name]
	if tt == nil {
		return fence.TopicID{}, nil, nil, false
	}
	parts := make([]group.PartitionAssigner, len(tt.owners))
	logs := make([]owner.PartitionLog, len(tt.owners))
	for i, o := range tt.owners {
		parts[i], logs[i] = o, tt.logs[i]
	}
	return tt.id, parts, logs, true
}

func (w *world) topicOf(name string) (Topic, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tt := w.topics[name]
	if tt == nil {
		return Topic{}, fmt.Errorf("no topic %q", name)
	}
	t := Topic{ID: tt.id, MaxBatchBytes: 1 << 20}
	for _, o := range tt.owners {
		var p Partition = o
		if w.wrapOut != nil && name == "out" {
			p = w.wrapOut(p)
		}
		t.Partitions = append(t.Partitions, p)
	}
	return t, nil
}

// createTopic makes a topic of n partitions.
func (w *world) createTopic(name string, n int) *testTopic {
	w.t.Helper()
	tt := &testTopic{}
	var logs []owner.PartitionLog
	if w.eng != nil {
		et, err := w.eng.CreateTopic(name, engine.TopicConfig{Partitions: n, Durability: w.dura})
		if err != nil {
			w.t.Fatal(err)
		}
		tt.id = et.ID()
		for i := range n {
			p, err := et.Partition(i)
			if err != nil {
				w.t.Fatal(err)
			}
			logs = append(logs, owner.NewEngineLog(p))
		}
	} else {
		tt.id[0], tt.id[1] = byte(len(w.topics)+1), 0x7f
		for i := range n {
			logs = append(logs, ownertest.NewLog(w.mem, fmt.Sprintf("%s/%d", name, i)))
		}
	}
	for i, l := range logs {
		o, err := owner.NewOwner(owner.OwnerConfig{Topic: tt.id, Partition: uint32(i), Log: l, Meta: w.meta,
			Producers: w.prods, Members: w.groups})
		if err != nil {
			w.t.Fatal(err)
		}
		tt.owners, tt.logs = append(tt.owners, o), append(tt.logs, l)
	}
	w.mu.Lock()
	w.topics[name] = tt
	w.mu.Unlock()
	return tt
}

// produce appends one batch of values to a partition.
func (w *world) produce(topic string, part int, values ...string) {
	w.t.Helper()
	var b record.BatchBuilder
	for _, v := range values {
		b.Append(record.Record{Timestamp: 7, Key: []byte("k-" + v), Value: []byte(v),
			Headers: []record.Header{{Key: "h", Value: []byte(v)}}})
	}
	batch, err := b.Build(record.CompressionNone)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.topics[topic].owners[part].Produce(context.Background(), batch); err != nil {
		w.t.Fatal(err)
	}
}

// read returns every record of a partition, in offset order.
func (w *world) read(topic string, part int) []record.Record {
	w.t.Helper()
	o := w.topics[topic].owners[part]
	var out []record.Record
	for off := uint64(0); off < o.State().HighWatermark; {
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
					r.Key, r.Value = append([]byte(nil), r.Key...), append([]byte(nil), r.Value...)
					r.Headers = slices.Clone(r.Headers)
					for i := range r.Headers {
						r.Headers[i].Value = append([]byte(nil), r.Headers[i].Value...)
					}
					out = append(out, r)
				}
			}
		}
		off = res.Next
	}
	return out
}

func values(rs []record.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

// waitFor waits until cond holds (20 s at most: a hang fails).
func (w *world) waitFor(what string, cond func() bool) {
	w.t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.t.Fatalf("never: %s", what)
}

func (w *world) caughtUp(name string) func() bool {
	return func() bool {
		info, err := w.mgr.Status(name)
		if err != nil || len(info.Partitions) == 0 {
			return false
		}
		for _, p := range info.Partitions {
			if p.Lag != 0 || p.HighWatermark == 0 {
				return false
			}
		}
		return true
	}
}

// fakePlugin is a transform plugin in Go: it passes every record through
// (its key, value and headers), counting records in its state (8 bytes,
// big endian). With failOn set it fails on a record of that value, as a
// plugin that traps. It is a function of its inputs, as a plugin is.
type fakePlugin struct {
	failOn atomic.Pointer[string]
	calls  atomic.Int64
	// double, when set, outputs every record twice.
	double atomic.Bool
}

var errFakeTrap = fmt.Errorf("%w: %q: ledge_transform: unreachable", plugins.ErrTrap, "pass")

func (f *fakePlugin) TransformFunc(ctx context.Context, name string, params plugins.Params, v *plugins.View, state []byte,
	use func(plugins.TransformResult) error) error {
	res, err := f.transform(ctx, name, params, v, state)
	if err != nil {
		return err
	}
	return use(res)
}

func (f *fakePlugin) transform(_ context.Context, name string, _ plugins.Params, v *plugins.View, state []byte) (plugins.TransformResult, error) {
	f.calls.Add(1)
	var n uint64
	if len(state) == 8 {
		n = binary.BigEndian.Uint64(state)
	}
	res := plugins.TransformResult{}
	for i := range v.Len() {
		r := v.Record(i)
		if s := f.failOn.Load(); s != nil && string(r.Value()) == *s {
			return plugins.TransformResult{}, errFakeTrap
		}
		o := plugins.Output{Input: i, Timestamp: r.Timestamp(), Key: r.Key(), Value: r.Value(), InputHeaders: true}
		res.Outputs = append(res.Outputs, o)
		if f.double.Load() {
			res.Outputs = append(res.Outputs, o)
		}
		n++
	}
	res.State = binary.BigEndian.AppendUint64(nil, n)
	return res, nil
}

// stateCount reads the transform's committed state on a partition: the
// records the fake plugin counted.
func (w *world) stateCount(name, topic string, part int) uint64 {
	w.t.Helper()
	snap, err := w.topics[topic].owners[part].InspectState(context.Background(), GroupPrefix+name, owner.StateQuery{Key: keyState})
	if err != nil {
		w.t.Fatal(err)
	}
	if len(snap.Entries) == 0 {
		return 0
	}
	return binary.BigEndian.Uint64(snap.Entries[0].Value)
}

// gatedOutput is an output partition whose appends can be made to fail
// before (the batch never reaches the log) or after (it landed, the
// runner is told otherwise) the append, as a crash at either point would
// leave them, or to wait at a gate.
type gatedOutput struct {
	Partition
	failBefore, failAfter atomic.Int32 // appends left to fail so
	gate                  chan struct{}
	entered               chan struct{}
}

var errCrash = errors.New("simulated crash")

func (g *gatedOutput) Produce(ctx context.Context, batch []byte) (owner.ProduceResult, error) {
	if g.gate != nil {
		g.entered <- struct{}{}
		<-g.gate
	}
	if g.failBefore.Add(-1) >= 0 {
		return owner.ProduceResult{}, errCrash
	}
	res, err := g.Partition.Produce(ctx, batch)
	if err == nil && g.failAfter.Add(-1) >= 0 {
		return owner.ProduceResult{}, errCrash
	}
	return res, err
}
