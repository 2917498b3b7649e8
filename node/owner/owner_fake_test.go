package owner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// memMeta is an in-memory Metadata with a durable copy: only what a Sync
// covered survives restart().
type memMeta struct {
	mu      sync.Mutex
	seq     Ticket
	synced  Ticket
	data    map[string][]byte
	durable map[string][]byte
	log     []metaWrite // writes not yet synced, in order
	// syncGate, when set, is called by Sync before it makes writes durable
	// (tests block or fail syncs with it).
	syncGate func(ctx context.Context) error
	syncs    int
}

type metaWrite struct {
	seq        Ticket
	key, value string
	del        bool
}

func newMemMeta() *memMeta {
	return &memMeta{data: map[string][]byte{}, durable: map[string][]byte{}}
}

func (m *memMeta) Get(key []byte) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[string(key)]
	return bytes.Clone(v), ok, nil
}

func (m *memMeta) Put(key, value []byte) (Ticket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.data[string(key)] = bytes.Clone(value)
	m.log = append(m.log, metaWrite{seq: m.seq, key: string(key), value: string(value)})
	return m.seq, nil
}

func (m *memMeta) Sync(ctx context.Context, t Ticket) error {
	m.mu.Lock()
	gate := m.syncGate
	m.mu.Unlock()
	if gate != nil {
		if err := gate(ctx); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncs++
	for len(m.log) > 0 && m.log[0].seq <= max(t, m.seq) {
		w := m.log[0]
		if w.del {
			delete(m.durable, w.key)
		} else {
			m.durable[w.key] = []byte(w.value)
		}
		m.log = m.log[1:]
	}
	m.synced = max(m.synced, t)
	return nil
}

func (m *memMeta) Scan(prefix []byte, fn func(k, v []byte) error) error {
	m.mu.Lock()
	keys := make([]string, 0, len(m.data))
	for k := range m.data {
		if strings.HasPrefix(k, string(prefix)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = bytes.Clone(m.data[k])
	}
	m.mu.Unlock()
	for i, k := range keys {
		if err := fn([]byte(k), vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// restart returns the metadata a restarted node finds: what was synced.
func (m *memMeta) restart() *memMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := newMemMeta()
	for k, v := range m.durable {
		r.data[k] = bytes.Clone(v)
		r.durable[k] = bytes.Clone(v)
	}
	return r
}

// memLog is an in-memory PartitionLog. Every record is durable at once.
// Reads can be suspended at their "file read" through readGate.
type memLog struct {
	meta *memMeta
	key  string // bookmark key prefix

	mu      sync.Mutex
	batches []storedBatch
	state   LogState
	lineage []fence.HistoryTransition
	changed chan struct{}
	// producers is updated by Append, kept by purge, forgotten past a
	// lossy recovery's kept end — as the engine does.
	producers map[fence.ProducerID]*fence.ProducerState
	// readGate, when set, is called by every ReadPlan.Execute before it
	// returns: the point where a real read touches the file.
	readGate func(ctx context.Context) error
	// retentionWant is the start retention would set (tests set it):
	// EnforceRetention raises the start towards it, by whole batches,
	// keeping every batch that reaches the floor.
	retentionWant uint64
}

type storedBatch struct {
	base, last uint64
	b          []byte
}

func newMemLog(meta *memMeta, name string) *memLog {
	return &memLog{
		meta:      meta,
		key:       "bm/" + name + "/",
		state:     LogState{History: 1},
		lineage:   []fence.HistoryTransition{{Epoch: 1, Kind: fence.TransitionCreate}},
		changed:   make(chan struct{}),
		producers: map[fence.ProducerID]*fence.ProducerState{},
	}
}

func (l *memLog) ProducerState(id fence.ProducerID) (fence.ProducerState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.producers[id]; s != nil {
		return *s, true
	}
	return fence.ProducerState{}, false
}

func (l *memLog) State() LogState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

func (l *memLog) Lineage() []fence.HistoryTransition {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fence.HistoryTransition(nil), l.lineage...)
}

func (l *memLog) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *memLog) Append(batch []byte) (uint64, uint64, error) {
	h, err := wire.ParseBatchHeader(batch)
	if err != nil {
		return 0, 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	base := l.state.HighWatermark
	wire.StampBaseOffset(batch, base)
	last := base + uint64(h.LastOffsetDelta)
	l.batches = append(l.batches, storedBatch{base, last, batch})
	if h.ProducerID != 0 && h.BaseSequence >= 0 {
		id := fence.ProducerID(h.ProducerID)
		if l.producers[id] == nil {
			l.producers[id] = new(fence.ProducerState)
		}
		l.producers[id].Record(produceRequest(h), base, last)
	}
	l.state.HighWatermark = last + 1
	l.notify()
	return base, last, nil
}

func (l *memLog) WaitDurable(ctx context.Context, off uint64) error { return ctx.Err() }

func (l *memLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

type memPlan struct {
	gate    func(ctx context.Context) error
	batches [][]byte
	next    uint64
}

func (p memPlan) Execute(ctx context.Context) (ReadResult, error) {
	if p.gate != nil {
		if err := p.gate(ctx); err != nil {
			return ReadResult{}, err
		}
	}
	return ReadResult{Batches: p.batches, Next: p.next}, nil
}

func (p memPlan) Release() {}

func (l *memLog) PlanRead(from uint64, maxBytes int) (ReadPlan, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from < l.state.LogStart || from >= l.state.HighWatermark {
		return nil, fmt.Errorf("offset %d outside [%d,%d)", from, l.state.LogStart, l.state.HighWatermark)
	}
	p := memPlan{gate: l.readGate, next: from}
	size := 0
	for _, b := range l.batches {
		if b.last < from || b.last < l.state.LogStart {
			continue
		}
		if len(p.batches) > 0 && size+len(b.b) > maxBytes {
			break
		}
		p.batches = append(p.batches, b.b)
		size += len(b.b)
		p.next = b.last + 1
	}
	if len(p.batches) == 0 {
		p.next = l.state.HighWatermark
	}
	return p, nil
}

func (l *memLog) Purge() (LogState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state.History++
	l.state.LogStart = l.state.HighWatermark
	l.lineage = append(l.lineage, fence.HistoryTransition{Epoch: l.state.History, Start: l.state.LogStart, Kind: fence.TransitionPurge})
	l.batches = nil
	l.notify()
	return l.state, nil
}

// lose models a lossy recovery: records from keptEnd on are gone, and
// numbering resumes at start.
func (l *memLog) lose(keptEnd, start uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := l.batches[:0]
	for _, b := range l.batches {
		if b.last < keptEnd {
			kept = append(kept, b)
		}
	}
	l.batches = kept
	for _, s := range l.producers {
		s.Forget(keptEnd)
	}
	l.state.History++
	l.state.HighWatermark = start
	l.lineage = append(l.lineage, fence.HistoryTransition{Epoch: l.state.History, Start: start, Kind: fence.TransitionLossyRecovery, KeptEnd: keptEnd})
	l.notify()
}

// retainFrom models retention raising the log start.
func (l *memLog) retainFrom(start uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state.LogStart = start
	l.notify()
}

func (l *memLog) EnforceRetention(_ time.Time, floor uint64) (RetentionResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.state.LogStart
	res := RetentionResult{Floor: floor, Wanted: start}
	for _, b := range l.batches {
		if b.last < start || b.last >= l.retentionWant {
			continue
		}
		res.Wanted = max(res.Wanted, b.last+1)
		if b.last >= floor || res.HeldBytes > 0 {
			res.HeldBytes += int64(len(b.b))
			continue
		}
		l.state.LogStart = b.last + 1
	}
	if l.state.LogStart != start {
		l.notify()
	}
	res.LogStart = l.state.LogStart
	return res, nil
}

func (l *memLog) Bookmark(consumer string) (Bookmark, bool, error) {
	v, ok, err := l.meta.Get([]byte(l.key + consumer))
	if err != nil || !ok {
		return Bookmark{}, false, err
	}
	var b Bookmark
	if _, err := fmt.Sscanf(string(v), "%d@%d", &b.Offset, &b.History); err != nil {
		return Bookmark{}, false, errors.New("bad bookmark")
	}
	return b, true, nil
}

func (l *memLog) SetBookmark(consumer string, b Bookmark) (Ticket, error) {
	return l.meta.Put([]byte(l.key+consumer), fmt.Appendf(nil, "%d@%d", b.Offset, b.History))
}
