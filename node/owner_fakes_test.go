package node

// In-memory stand-ins for an owner's storage (memMeta, memLog) and the
// helpers of the owner's own tests that the node's tests use as well:
// node/owner's tests keep the originals, as a test file of one package
// cannot be imported by another's.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// memMeta is an in-memory Metadata with a durable copy: only what a Sync
// covered survives restart().
type memMeta struct {
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

func newMemMeta() *memMeta {
	return &memMeta{data: map[string][]byte{}, durable: map[string][]byte{}}
}

func (m *memMeta) Get(key []byte) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[string(key)]
	return bytes.Clone(v), ok, nil
}

func (m *memMeta) Put(key, value []byte) (owner.Ticket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.data[string(key)] = bytes.Clone(value)
	m.log = append(m.log, metaWrite{seq: m.seq, key: string(key), value: string(value)})
	return m.seq, nil
}

func (m *memMeta) Sync(ctx context.Context, t owner.Ticket) error {
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
	state   owner.LogState
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
		state:     owner.LogState{History: 1},
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

func (l *memLog) State() owner.LogState {
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
		l.producers[id].Record(fence.ProduceRequest{Producer: fence.ProducerID(h.ProducerID), Epoch: fence.ProducerEpoch(h.ProducerEpoch), BaseSequence: h.BaseSequence, Count: int32(h.RecordCount)}, base, last)
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

func (p memPlan) Execute(ctx context.Context) (owner.ReadResult, error) {
	if p.gate != nil {
		if err := p.gate(ctx); err != nil {
			return owner.ReadResult{}, err
		}
	}
	return owner.ReadResult{Batches: p.batches, Next: p.next}, nil
}

func (p memPlan) Release() {}

func (l *memLog) PlanRead(from uint64, maxBytes int) (owner.ReadPlan, error) {
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

func (l *memLog) Purge() (owner.LogState, error) {
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

func (l *memLog) EnforceRetention(_ time.Time, floor uint64) (owner.RetentionResult, error) {
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

func (l *memLog) Bookmark(consumer string) (owner.Bookmark, bool, error) {
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

func (l *memLog) SetBookmark(consumer string, b owner.Bookmark) (owner.Ticket, error) {
	return l.meta.Put([]byte(l.key+consumer), fmt.Appendf(nil, "%d@%d", b.Offset, b.History))
}

func testBatch(t testing.TB, values ...string) []byte {
	t.Helper()
	var b wire.BatchBuilder
	for _, v := range values {
		b.Append(wire.Record{Timestamp: 1, Value: []byte(v)})
	}
	batch, err := b.Build(wire.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func newTestOwner(t testing.TB, topic fence.TopicID, m *memMeta, l *memLog) *owner.Owner {
	t.Helper()
	prods, err := owner.OpenProducers(m)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := owner.OpenSessions(m)
	if err != nil {
		t.Fatal(err)
	}
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: topic, Log: l, Meta: m, Producers: prods, Sessions: sess})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func benchBatch(b *testing.B, records, size int) []byte {
	var bb wire.BatchBuilder
	v := make([]byte, size)
	for range records {
		bb.Append(wire.Record{Timestamp: 1, Value: v})
	}
	batch, err := bb.Build(wire.CompressionNone)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

func recordsOf(t interface{ Fatal(...any) }, r owner.PollResult) []string {
	var out []string
	for _, b := range r.Batches {
		it, err := wire.NewRecordIterator(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		for rec, ok := it.Next(); ok; rec, ok = it.Next() {
			if rec.Offset >= r.Token.From && rec.Offset < r.Token.Next {
				out = append(out, string(rec.Value))
			}
		}
	}
	return out
}

// testFloor is a retention floor a test moves (an uplink's position).
type testFloor struct {
	mu  sync.Mutex
	off uint64
	set bool
}

func (f *testFloor) move(off uint64, set bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off, f.set = off, set
}

func (f *testFloor) get() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.off, f.set
}

// covers: issue 11 (retention never deletes records that have not been
// forwarded; the choice is visible when it bites)
//
// TestOwnerRetentionFloor: the owner asks its floor at every enforcement;
// retention holds back while the floor is below what it would delete,
// follows the floor as it rises, and runs as configured once there is no
// floor. RetentionHold says what was held back and counts it.

type readGate struct {
	arrived chan struct{}
	release chan struct{}
}

func newReadGate() *readGate {
	return &readGate{arrived: make(chan struct{}), release: make(chan struct{})}
}

func (g *readGate) wait(ctx context.Context) error {
	close(g.arrived)
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var scenarioTopic = fence.TopicID{0x1e, 0xd9, 0xe0}

func renderPoll(r owner.PollResult, err error) string {
	if err != nil {
		return renderErr(err)
	}
	var sb strings.Builder
	n := 0
	for _, b := range r.Batches {
		it, err := wire.NewRecordIterator(b, 0)
		if err != nil {
			return "error: " + err.Error()
		}
		for rec, ok := it.Next(); ok; rec, ok = it.Next() {
			if rec.Offset < r.Token.From || rec.Offset >= r.Token.Next {
				continue
			}
			if n == 0 {
				sb.WriteString("records:")
			}
			fmt.Fprintf(&sb, " %d:%s", rec.Offset, rec.Value)
			n++
		}
		if it.Err() != nil {
			return "error: " + it.Err().Error()
		}
	}
	if n == 0 {
		sb.WriteString("no records")
	}
	fmt.Fprintf(&sb, "\nnext %d; token h%d [%d,%d)", r.Next, r.Token.History, r.Token.From, r.Token.Next)
	return sb.String()
}

func renderErr(err error) string {
	var fe *fence.Error
	if errors.As(err, &fe) {
		retry := ""
		if fence.Retryable(err) {
			retry = ", retryable"
		}
		return fmt.Sprintf("rejected: %s (%s%s)", fe.Code, fe.Action, retry)
	}
	return "error: " + err.Error()
}

// The in-memory log's state stores: keys "st/<partition>/" + the
// length-prefixed consumer + the state key, written in one metadata step
// with the bookmark, as the engine writes them in one batch.

// apply writes puts and deletes (a nil value deletes) as one step of the
// metadata: one ticket, all visible at once, all durable with one Sync.
func (m *memMeta) apply(writes []metaWrite) owner.Ticket {
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
func (l *memLog) statePrefix(consumer string) string {
	k := binary.AppendUvarint([]byte("st/"+strings.TrimPrefix(l.key, "bm/")), uint64(len(consumer)))
	return string(append(k, consumer...))
}

func (l *memLog) SetBookmarkState(consumer string, b owner.Bookmark, changes []owner.StateChange) (owner.Ticket, error) {
	ws := make([]metaWrite, 0, 1+len(changes))
	ws = append(ws, metaWrite{key: l.key + consumer, value: bookmarkText(b)})
	pre := l.statePrefix(consumer)
	for _, c := range changes {
		ws = append(ws, metaWrite{key: pre + string(c.Key), value: string(c.Value), del: c.Delete})
	}
	return l.meta.apply(ws), nil
}

func (l *memLog) ScanState(consumer string, prefix []byte, fn func(k, v []byte) error) error {
	pre := l.statePrefix(consumer)
	return l.meta.Scan([]byte(pre+string(prefix)), func(k, v []byte) error {
		return fn(k[len(pre):], v)
	})
}

func (l *memLog) DeleteConsumer(consumer string) (owner.Ticket, error) {
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

// benchEngineOwner is the owner of a partition of an engine on an
// in-memory file system.
func benchEngineOwner(b *testing.B, d engine.Durability) *owner.Owner {
	e, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "data", ReservedBytes: -1,
		Now: func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	t, err := e.CreateTopic("bench", engine.TopicConfig{Partitions: 1, Durability: d})
	if err != nil {
		b.Fatal(err)
	}
	p, err := t.Partition(0)
	if err != nil {
		b.Fatal(err)
	}
	meta := owner.NewEngineMetadata(e)
	prods, err := owner.OpenProducers(meta)
	if err != nil {
		b.Fatal(err)
	}
	sess, err := owner.OpenSessions(meta)
	if err != nil {
		b.Fatal(err)
	}
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: t.ID(), Log: owner.NewEngineLog(p), Meta: meta, Producers: prods, Sessions: sess})
	if err != nil {
		b.Fatal(err)
	}
	return o
}
