package ownertest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/record"
)

// Meta is an in-memory Metadata with a durable copy: only what a Sync
// covered survives Restart.
type Meta struct {
	mu      sync.Mutex
	seq     owner.Ticket
	synced  owner.Ticket
	data    map[string][]byte
	durable map[string][]byte
	log     []metaWrite // writes not yet synced, in order
	// syncGate, when set, is called by Sync before it makes writes durable
	// (tests block or fail syncs with it).
	syncGate func(ctx context.Context) error
	syncs    int
}

type metaWrite struct {
	seq        owner.Ticket
	key, value string
	del        bool
}

// NewMeta returns an empty in-memory metadata store.
func NewMeta() *Meta {
	return &Meta{data: map[string][]byte{}, durable: map[string][]byte{}}
}

func (m *Meta) Get(key []byte) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[string(key)]
	return bytes.Clone(v), ok, nil
}

func (m *Meta) Put(key, value []byte) (owner.Ticket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.data[string(key)] = bytes.Clone(value)
	m.log = append(m.log, metaWrite{seq: m.seq, key: string(key), value: string(value)})
	return m.seq, nil
}

func (m *Meta) Sync(ctx context.Context, t owner.Ticket) error {
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

func (m *Meta) Scan(prefix []byte, fn func(k, v []byte) error) error {
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

// Restart returns the metadata a restarted node finds: what was synced.
func (m *Meta) Restart() *Meta {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := NewMeta()
	for k, v := range m.durable {
		r.data[k] = bytes.Clone(v)
		r.durable[k] = bytes.Clone(v)
	}
	return r
}

// Log is an in-memory PartitionLog. Every record is durable at once.
// Reads can be suspended at their "file read" (SuspendNextRead).
type Log struct {
	meta *Meta
	key  string // bookmark key prefix

	mu      sync.Mutex
	batches []storedBatch
	state   owner.LogState
	lineage []fence.HistoryTransition
	changed chan struct{}
	// producers is updated by Append, kept by purge, forgotten past a
	// lossy recovery's kept end — as the engine does.
	producers map[fence.ProducerID]*fence.ProducerState
	// readGate, when set, is called by every owner.ReadPlan.Execute before it
	// returns: the point where a real read touches the file.
	readGate func(ctx context.Context) error
	// retentionWant is the start retention would set (tests set it):
	// EnforceRetention raises the start towards it, by whole batches,
	// keeping every batch that reaches the floor.
	retentionWant uint64
	// held: appends stay above the high watermark, up to end, until
	// ShowAppends (a durability policy that shows only synced records).
	held bool
	end  uint64
}

// HoldAppends keeps later appends from readers: the high watermark stays
// where it is until ShowAppends, as under a durability policy that shows
// readers only what is synced.
func (l *Log) HoldAppends() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.end = true, max(l.end, l.state.HighWatermark)
}

// ShowAppends raises the high watermark past every append held back.
func (l *Log) ShowAppends() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = false
	if l.end > l.state.HighWatermark {
		l.state.HighWatermark = l.end
		l.notify()
	}
}

type storedBatch struct {
	base, last uint64
	b          []byte
}

// NewLog returns an empty in-memory log of history 1 keeping its
// bookmarks in meta under name.
func NewLog(meta *Meta, name string) *Log {
	return &Log{
		meta:      meta,
		key:       "bm/" + name + "/",
		state:     owner.LogState{History: 1},
		lineage:   []fence.HistoryTransition{{Epoch: 1, Kind: fence.TransitionCreate}},
		changed:   make(chan struct{}),
		producers: map[fence.ProducerID]*fence.ProducerState{},
	}
}

func (l *Log) ProducerState(id fence.ProducerID) (fence.ProducerState, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.producers[id]; s != nil {
		return *s, true
	}
	return fence.ProducerState{}, false
}

func (l *Log) State() owner.LogState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

func (l *Log) Lineage() []fence.HistoryTransition {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fence.HistoryTransition(nil), l.lineage...)
}

func (l *Log) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *Log) Append(batch []byte) (uint64, uint64, error) {
	h, err := record.ParseBatchHeader(batch)
	if err != nil {
		return 0, 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	base := max(l.state.HighWatermark, l.end)
	record.StampBaseOffset(batch, base)
	last := base + uint64(h.LastOffsetDelta)
	l.batches = append(l.batches, storedBatch{base, last, batch})
	if h.ProducerID != 0 && h.BaseSequence >= 0 {
		id := fence.ProducerID(h.ProducerID)
		if l.producers[id] == nil {
			l.producers[id] = new(fence.ProducerState)
		}
		l.producers[id].Record(fence.ProduceRequest{Producer: fence.ProducerID(h.ProducerID), Epoch: fence.ProducerEpoch(h.ProducerEpoch), BaseSequence: h.BaseSequence, Count: int32(h.RecordCount)}, base, last)
	}
	l.end = last + 1
	if !l.held {
		l.state.HighWatermark = last + 1
		l.notify()
	}
	return base, last, nil
}

func (l *Log) WaitDurable(ctx context.Context, off uint64) error { return ctx.Err() }

func (l *Log) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

type memPlan struct {
	gate    func(ctx context.Context) error
	batches [][]byte
	next    uint64
}

func (p memPlan) Execute(ctx context.Context) (owner.ReadResult, error) {
	if p.gate != nil {
		if err := p.gate(ctx); err != nil {
			return owner.ReadResult{}, err
		}
	}
	return owner.ReadResult{Batches: p.batches, Next: p.next}, nil
}

func (p memPlan) Release() {}

func (l *Log) PlanRead(from uint64, maxBytes int) (owner.ReadPlan, error) {
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
		if b.base >= l.state.HighWatermark {
			break
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

func (l *Log) Purge() (owner.LogState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state.History++
	l.state.LogStart = l.state.HighWatermark
	l.lineage = append(l.lineage, fence.HistoryTransition{Epoch: l.state.History, Start: l.state.LogStart, Kind: fence.TransitionPurge})
	l.batches = nil
	l.notify()
	return l.state, nil
}

// Lose models a lossy recovery: records from keptEnd on are gone, and
// numbering resumes at start.
func (l *Log) Lose(keptEnd, start uint64) {
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
	l.state.HighWatermark, l.end = start, start
	l.lineage = append(l.lineage, fence.HistoryTransition{Epoch: l.state.History, Start: start, Kind: fence.TransitionLossyRecovery, KeptEnd: keptEnd})
	l.notify()
}

// RetainFrom models retention raising the log start.
func (l *Log) RetainFrom(start uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state.LogStart = start
	l.notify()
}

func (l *Log) EnforceRetention(_ time.Time, floor uint64) (owner.RetentionResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.state.LogStart
	res := owner.RetentionResult{Floor: floor, Wanted: start}
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

func (l *Log) Bookmark(consumer string) (owner.Bookmark, bool, error) {
	v, ok, err := l.meta.Get([]byte(l.key + consumer))
	if err != nil || !ok {
		return owner.Bookmark{}, false, err
	}
	var b owner.Bookmark
	if _, err := fmt.Sscanf(string(v), "%d@%d", &b.Offset, &b.History); err != nil {
		return owner.Bookmark{}, false, errors.New("bad bookmark")
	}
	return b, true, nil
}

func (l *Log) SetBookmark(consumer string, b owner.Bookmark) (owner.Ticket, error) {
	return l.meta.Put([]byte(l.key+consumer), fmt.Appendf(nil, "%d@%d", b.Offset, b.History))
}

// The in-memory log's state stores: keys "st/<partition>/" + the
// length-prefixed consumer + the state key, written in one metadata step
// with the bookmark, as the engine writes them in one batch.

// apply writes puts and deletes (a nil value deletes) as one step of the
// metadata: one ticket, all visible at once, all durable with one Sync.
func (m *Meta) apply(writes []metaWrite) owner.Ticket {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	for _, w := range writes {
		w.seq = m.seq
		if w.del {
			delete(m.data, w.key)
		} else {
			m.data[w.key] = []byte(w.value)
		}
		m.log = append(m.log, w)
	}
	return m.seq
}

// statePrefix is the key prefix of consumer's state store on l.
func (l *Log) statePrefix(consumer string) string {
	k := binary.AppendUvarint([]byte("st/"+strings.TrimPrefix(l.key, "bm/")), uint64(len(consumer)))
	return string(append(k, consumer...))
}

func (l *Log) SetBookmarkState(consumer string, b owner.Bookmark, changes []owner.StateChange) (owner.Ticket, error) {
	ws := make([]metaWrite, 0, 1+len(changes))
	ws = append(ws, metaWrite{key: l.key + consumer, value: bookmarkText(b)})
	pre := l.statePrefix(consumer)
	for _, c := range changes {
		ws = append(ws, metaWrite{key: pre + string(c.Key), value: string(c.Value), del: c.Delete})
	}
	return l.meta.apply(ws), nil
}

func (l *Log) ScanState(consumer string, prefix []byte, fn func(k, v []byte) error) error {
	pre := l.statePrefix(consumer)
	return l.meta.Scan([]byte(pre+string(prefix)), func(k, v []byte) error {
		return fn(k[len(pre):], v)
	})
}

func (l *Log) DeleteConsumer(consumer string) (owner.Ticket, error) {
	pre := l.statePrefix(consumer)
	ws := []metaWrite{{key: l.key + consumer, del: true}}
	l.meta.mu.Lock()
	var keys []string
	for k := range l.meta.data {
		if strings.HasPrefix(k, pre) {
			keys = append(keys, k)
		}
	}
	l.meta.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		ws = append(ws, metaWrite{key: k, del: true})
	}
	return l.meta.apply(ws), nil
}

// bookmarkText is the in-memory log's bookmark encoding.
func bookmarkText(b owner.Bookmark) string { return fmt.Sprintf("%d@%d", b.Offset, b.History) }
