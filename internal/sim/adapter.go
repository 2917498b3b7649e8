package sim

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node"
)

// The engine as the owner sees it: a node.PartitionLog per partition and
// a node.Metadata over the engine's node space, as the node wires them.
// The log also reports every bookmark the owner writes, so that the model
// learns the commit order without re-deriving the owner's decisions, and
// checks the write against the partition's state at that moment.

// ownerLog is an engine partition as an owner's node.PartitionLog.
type ownerLog struct {
	p   *engine.Partition
	obs bookmarkObserver
}

// bookmarkObserver learns of every bookmark write the owner orders.
type bookmarkObserver interface {
	bookmarkWritten(key string, b node.Bookmark, st engine.PartitionState, err error)
}

var _ node.PartitionLog = (*ownerLog)(nil)

func logState(st engine.PartitionState) node.LogState {
	return node.LogState{LogStart: st.LogStart, HighWatermark: st.HighWatermark, History: st.History, Failed: st.Failed}
}

func (l *ownerLog) State() node.LogState { return logState(l.p.State()) }

func (l *ownerLog) Lineage() []fence.HistoryTransition { return l.p.State().Lineage }

func (l *ownerLog) Append(batch []byte) (uint64, uint64, error) {
	r, err := l.p.Append(batch)
	return r.Base, r.Last, err
}

func (l *ownerLog) ProducerState(id fence.ProducerID) (fence.ProducerState, bool) {
	return l.p.ProducerState(id)
}

func (l *ownerLog) WaitDurable(ctx context.Context, off uint64) error {
	return l.p.WaitDurable(ctx, off)
}

func (l *ownerLog) Changed() <-chan struct{} { return l.p.Changed() }

func (l *ownerLog) PlanRead(from uint64, maxBytes int) (node.ReadPlan, error) {
	plan, err := l.p.PlanRead(from, maxBytes)
	if err != nil {
		return nil, err
	}
	return ownerPlan{plan}, nil
}

func (l *ownerLog) Purge() (node.LogState, error) {
	st, err := l.p.Purge()
	if err != nil {
		return node.LogState{}, err
	}
	return logState(st), nil
}

func (l *ownerLog) EnforceRetention(now time.Time) error { return l.p.EnforceRetention(now) }

func (l *ownerLog) Bookmark(consumer string) (node.Bookmark, bool, error) {
	b, ok, err := l.p.Bookmark(consumer)
	return node.Bookmark{Offset: b.Offset, History: b.History}, ok, err
}

func (l *ownerLog) SetBookmark(consumer string, b node.Bookmark) (node.Ticket, error) {
	st := l.p.State()
	seq, err := l.p.SetBookmark(consumer, engine.Bookmark{Offset: b.Offset, History: b.History})
	if l.obs != nil {
		l.obs.bookmarkWritten(consumer, b, st, err)
	}
	return node.Ticket(seq), err
}

// OffsetForTime lets the owner serve timestamp positions, as the node's
// adapter does.
func (l *ownerLog) OffsetForTime(ctx context.Context, ts int64) (uint64, error) {
	return l.p.OffsetForTime(ctx, ts)
}

type ownerPlan struct{ plan engine.ReadPlan }

func (p ownerPlan) Execute(ctx context.Context) (node.ReadResult, error) {
	r, err := p.plan.Execute(ctx)
	return node.ReadResult{Batches: r.Batches, Next: r.Next}, err
}

func (p ownerPlan) Release() { p.plan.Release() }

// nodeMeta is the node's metadata: one engine space.
type nodeMeta struct {
	e     *engine.Engine
	space engine.Space
}

var _ node.Metadata = nodeMeta{}

func newNodeMeta(e *engine.Engine) nodeMeta {
	return nodeMeta{e: e, space: engine.NodeSpace("node")}
}

func (m nodeMeta) Get(key []byte) ([]byte, bool, error) { return m.e.GetMeta(m.space, key) }

func (m nodeMeta) Put(key, value []byte) (node.Ticket, error) {
	seq, err := m.e.PutMeta(m.space, key, value)
	return node.Ticket(seq), err
}

func (m nodeMeta) Sync(ctx context.Context, t node.Ticket) error {
	return m.e.SyncMeta(ctx, engine.MetaSeq(t))
}

func (m nodeMeta) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return m.e.ScanMeta(m.space, func(k, v []byte) error {
		if !bytes.HasPrefix(k, prefix) {
			return nil
		}
		return fn(k, v)
	})
}

// newOwner builds the owner of partition i of t, as the node does.
func newOwner(t *engine.Topic, i int, meta node.Metadata, obs bookmarkObserver) (*node.Owner, *ownerLog, error) {
	p, err := t.Partition(i)
	if err != nil {
		return nil, nil, err
	}
	l := &ownerLog{p: p, obs: obs}
	o, err := node.NewOwner(node.OwnerConfig{Topic: t.ID(), Partition: uint32(i), Log: l, Meta: meta})
	if err != nil {
		return nil, nil, fmt.Errorf("sim: owner of %s/%d: %w", t.Name(), i, err)
	}
	return o, l, nil
}
