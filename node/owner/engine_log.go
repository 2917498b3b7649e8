package owner

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
)

// nodeSpace is the engine metadata space of the node's own keys (tokens,
// producer registry, consumer sessions).
const nodeSpace = "node"

// EngineLog is an engine partition as an owner's PartitionLog, as the
// node wires it. It also finds offsets by timestamp. The simulator wraps
// it to observe what the owner writes.
type EngineLog struct {
	p     *engine.Partition
	state *stateCache
}

// NewEngineLog returns p as a PartitionLog.
func NewEngineLog(p *engine.Partition) EngineLog {
	return EngineLog{p: p, state: &stateCache{}}
}

// Partition returns the engine partition l reads and writes.
func (l EngineLog) Partition() *engine.Partition { return l.p }

// NewEngineMetadata returns the node's Metadata in e: the engine's
// node-scoped metadata space, as the node wires it.
func NewEngineMetadata(e *engine.Engine) Metadata {
	return engineMeta{e: e, space: engine.NodeSpace(nodeSpace)}
}

// stateCache keeps the partition's last state between its changes. The
// engine's State copies the lineage on every call, and an owner reads the
// state at every step (twice per poll); the cache asks again only once the
// partition's change signal fired, and keeps the lineage it has while the
// history epoch stays the same.
type stateCache struct {
	mu      sync.Mutex
	changed <-chan struct{} // nil: nothing cached yet
	state   LogState
	lineage []fence.HistoryTransition // of state.History; never modified
}

// current returns the partition's state and lineage.
func (l EngineLog) current() (LogState, []fence.HistoryTransition) {
	c := l.state
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed != nil {
		select {
		case <-c.changed:
		default:
			// No change since the cached state was read: it is the
			// state now.
			return c.state, c.lineage
		}
	}
	// Taken before the state is read, so that a change after the read
	// closes it.
	c.changed = l.p.Changed()
	st := l.p.State()
	if c.lineage == nil || st.History != c.state.History {
		c.lineage = st.Lineage
	}
	c.state = LogState{LogStart: st.LogStart, HighWatermark: st.HighWatermark, History: st.History, Failed: st.Failed}
	return c.state, c.lineage
}

// Skipped returns how many offsets of [from, to) a recovery skipped: they
// hold no record (engine.Partition.Skipped).
func (l EngineLog) Skipped(from, to uint64) uint64 { return l.p.Skipped(from, to) }

func (l EngineLog) State() LogState {
	st, _ := l.current()
	return st
}

func (l EngineLog) Lineage() []fence.HistoryTransition {
	_, lin := l.current()
	return lin
}

// AppendOwned appends batch and calls release once the engine lets go of
// it (engine.Partition.AppendOwned).
func (l EngineLog) AppendOwned(batch []byte, release func()) (uint64, uint64, error) {
	r, err := l.p.AppendOwned(batch, release)
	if err != nil {
		return 0, 0, err
	}
	return r.Base, r.Last, nil
}

func (l EngineLog) Append(batch []byte) (uint64, uint64, error) {
	r, err := l.p.Append(batch)
	return r.Base, r.Last, err
}

func (l EngineLog) ProducerState(id fence.ProducerID) (fence.ProducerState, bool) {
	return l.p.ProducerState(id)
}

func (l EngineLog) WaitDurable(ctx context.Context, off uint64) error {
	return l.p.WaitDurable(ctx, off)
}

func (l EngineLog) Changed() <-chan struct{} { return l.p.Changed() }

func (l EngineLog) PlanRead(from uint64, maxBytes int) (ReadPlan, error) {
	plan, err := l.p.PlanRead(from, maxBytes)
	if err != nil {
		return nil, err
	}
	return enginePlan{plan}, nil
}

func (l EngineLog) Purge() (LogState, error) {
	st, err := l.p.Purge()
	if err != nil {
		return LogState{}, err
	}
	return LogState{LogStart: st.LogStart, HighWatermark: st.HighWatermark, History: st.History, Failed: st.Failed}, nil
}

func (l EngineLog) EnforceRetention(now time.Time, floor uint64) (RetentionResult, error) {
	r, err := l.p.EnforceRetention(now, floor)
	return RetentionResult{LogStart: r.LogStart, Floor: floor, Wanted: max(r.Wanted, r.LogStart), HeldBytes: r.HeldBytes}, err
}

func (l EngineLog) Bookmark(consumer string) (Bookmark, bool, error) {
	b, ok, err := l.p.Bookmark(consumer)
	return Bookmark{Offset: b.Offset, History: b.History}, ok, err
}

func (l EngineLog) SetBookmark(consumer string, b Bookmark) (Ticket, error) {
	seq, err := l.p.SetBookmark(consumer, engine.Bookmark{Offset: b.Offset, History: b.History})
	return Ticket(seq), err
}

func (l EngineLog) SetBookmarkState(consumer string, b Bookmark, changes []StateChange) (Ticket, error) {
	seq, err := l.p.CommitState(consumer, engine.Bookmark{Offset: b.Offset, History: b.History}, changes)
	return Ticket(seq), err
}

func (l EngineLog) ScanState(consumer string, prefix []byte, fn func(k, v []byte) error) error {
	return l.p.ScanState(consumer, prefix, fn)
}

// ScanStateFrom is ScanState from the first key above after.
func (l EngineLog) ScanStateFrom(consumer string, prefix, after []byte, fn func(k, v []byte) error) error {
	return l.p.ScanStateFrom(consumer, prefix, after, fn)
}

func (l EngineLog) DeleteConsumer(consumer string) (Ticket, error) {
	seq, err := l.p.DeleteConsumer(consumer)
	return Ticket(seq), err
}

// OffsetForTime implements timeIndex.
func (l EngineLog) OffsetForTime(ctx context.Context, ts int64) (uint64, error) {
	return l.p.OffsetForTime(ctx, ts)
}

type enginePlan struct{ plan engine.ReadPlan }

func (p enginePlan) Execute(ctx context.Context) (ReadResult, error) {
	r, err := p.plan.Execute(ctx)
	return ReadResult{Batches: r.Batches, Next: r.Next, Release: r.Release}, err
}

func (p enginePlan) Release() { p.plan.Release() }

// engineMeta is the node's Metadata in one engine metadata space.
type engineMeta struct {
	e     *engine.Engine
	space engine.Space
}

func (m engineMeta) Get(key []byte) ([]byte, bool, error) { return m.e.GetMeta(m.space, key) }

func (m engineMeta) Put(key, value []byte) (Ticket, error) {
	seq, err := m.e.PutMeta(m.space, key, value)
	return Ticket(seq), err
}

func (m engineMeta) Sync(ctx context.Context, t Ticket) error {
	return m.e.SyncMeta(ctx, engine.MetaSeq(t))
}

func (m engineMeta) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return m.e.ScanMeta(m.space, func(k, v []byte) error {
		if !bytes.HasPrefix(k, prefix) {
			return nil
		}
		return fn(k, v)
	})
}

// timeIndex is a log that finds offsets by timestamp (the engine's does).
type timeIndex interface {
	OffsetForTime(ctx context.Context, ts int64) (uint64, error)
}

// OffsetForTime returns the offset of the first batch that may hold a
// record at or after ts, if the log keeps a time index.
func OffsetForTime(ctx context.Context, l PartitionLog, ts int64) (uint64, error) {
	ti, ok := l.(timeIndex)
	if !ok {
		return 0, invalidArgument("this storage keeps no time index: timestamp positions are not served")
	}
	return ti.OffsetForTime(ctx, ts)
}
