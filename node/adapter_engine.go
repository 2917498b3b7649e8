package node

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// The storage engine as the node's Storage: engine topics and partitions
// become StoredTopics and PartitionLogs, the engine's node-scoped metadata
// space becomes Metadata, and the wire's topic configuration maps to the
// engine's.

// nodeSpace is the engine metadata space of the node's own keys (tokens,
// producer registry, consumer sessions).
const nodeSpace = "node"

// openEngine opens the storage engine in cfg.DataDir (its LOCK, meta/,
// topics/ and ballast live beside the node's tls/ and admin.token).
func openEngine(ctx context.Context, cfg Config) (Storage, error) {
	e, err := engine.OpenContext(ctx, engine.Options{FS: cfg.FS, Dir: cfg.DataDir, Now: cfg.Now, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &engineStorage{e: e, meta: engineMeta{e: e, space: engine.NodeSpace(nodeSpace)}}, nil
}

type engineStorage struct {
	e    *engine.Engine
	meta engineMeta
}

func (s *engineStorage) Metadata() Metadata { return s.meta }

func (s *engineStorage) Topics() ([]StoredTopic, error) {
	var out []StoredTopic
	for _, t := range s.e.Topics() {
		st, err := storedTopic(t)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *engineStorage) CreateTopic(name string, cfg wire.TopicConfig) (StoredTopic, error) {
	ec, err := engineConfig(cfg)
	if err != nil {
		return StoredTopic{}, err
	}
	t, err := s.e.CreateTopic(name, ec)
	if err != nil {
		return StoredTopic{}, err
	}
	return storedTopic(t)
}

func (s *engineStorage) DeleteTopic(name string, id fence.TopicID) error {
	t, err := s.e.Topic(name)
	if err != nil {
		return err
	}
	if t.ID() != id {
		return fmt.Errorf("%w: %q is now topic id %s", ErrUnknownTopic, name, t.ID())
	}
	return s.e.DeleteTopic(name)
}

func (s *engineStorage) Close() error { return s.e.Close() }

func storedTopic(t *engine.Topic) (StoredTopic, error) {
	st := StoredTopic{Name: t.Name(), ID: t.ID(), Config: wireConfig(t.Config())}
	for i := range t.Partitions() {
		p, err := t.Partition(i)
		if err != nil {
			return StoredTopic{}, err
		}
		st.Partitions = append(st.Partitions, NewEngineLog(p))
	}
	return st, nil
}

// engineConfig maps a requested configuration; zero fields stay zero and
// take the engine's defaults.
func engineConfig(c wire.TopicConfig) (engine.TopicConfig, error) {
	ec := engine.TopicConfig{
		Partitions:   int(c.Partitions),
		SyncInterval: c.SyncInterval,
		Compression:  c.Compression,
		RetentionAge: c.RetentionAge,
		SegmentAge:   c.SegmentAge,
	}
	if c.RetentionBytes > math.MaxInt64 || c.SegmentBytes > math.MaxInt64 {
		return ec, invalidArgument("retention bytes and segment bytes must fit a signed 64-bit integer")
	}
	ec.RetentionBytes, ec.SegmentBytes, ec.MaxBatchBytes = int64(c.RetentionBytes), int64(c.SegmentBytes), int(c.MaxBatchBytes)
	switch c.Durability {
	case wire.DurabilityAlways:
		ec.Durability = engine.DurabilityAlways
	case wire.DurabilityInterval:
		ec.Durability = engine.DurabilityInterval
	case wire.DurabilityNone:
		ec.Durability = engine.DurabilityNone
	}
	if c.Timestamps == wire.TimestampModeAppend {
		ec.Timestamps = engine.TimestampAppend
	}
	return ec, nil
}

// wireConfig describes an engine configuration (defaults filled in).
func wireConfig(c engine.TopicConfig) wire.TopicConfig {
	wc := wire.TopicConfig{
		Partitions:     uint32(c.Partitions),
		SyncInterval:   c.SyncInterval,
		Compression:    c.Compression,
		RetentionAge:   c.RetentionAge,
		RetentionBytes: uint64(c.RetentionBytes),
		SegmentBytes:   uint64(c.SegmentBytes),
		SegmentAge:     c.SegmentAge,
		MaxBatchBytes:  uint32(c.MaxBatchBytes),
		Timestamps:     wire.TimestampModeProducer,
	}
	switch c.Durability {
	case engine.DurabilityAlways:
		wc.Durability = wire.DurabilityAlways
	case engine.DurabilityInterval:
		wc.Durability = wire.DurabilityInterval
	case engine.DurabilityNone:
		wc.Durability = wire.DurabilityNone
	}
	if c.Timestamps == engine.TimestampAppend {
		wc.Timestamps = wire.TimestampModeAppend
	}
	return wc
}

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

// offsetForTime returns the offset of the first batch that may hold a
// record at or after ts, if the log keeps a time index.
func offsetForTime(ctx context.Context, l PartitionLog, ts int64) (uint64, error) {
	ti, ok := l.(timeIndex)
	if !ok {
		return 0, invalidArgument("this storage keeps no time index: timestamp positions are not served")
	}
	return ti.OffsetForTime(ctx, ts)
}
