package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
)

// maxQueuedBytes bounds the appended bytes waiting for the flusher of one
// partition; Append waits for room beyond it.
const maxQueuedBytes = 64 << 20

// Partition is one append-only log of a topic. Its methods are safe for
// concurrent use; the partition owner (node/owner) orders them.
//
// Its fields are grouped by who touches them. mu guards every group from
// the log's end to the fsync backlog: appenders, readers, the flusher and
// the syncer all take it, briefly, and never across a file operation.
// What lies outside it says what guards it.
type Partition struct {
	// Identity: set at open, never changed.
	t     *Topic
	e     *Engine
	index int
	dir   string
	cfg   *TopicConfig

	// stateMu serializes writes of the durable partition state; durable is
	// the last state written (guarded by stateMu).
	stateMu sync.Mutex
	durable partState

	mu sync.Mutex

	// The log's ends and history (mu). Append hands out next; the flusher
	// raises writtenEnd, the flusher or the syncer syncedEnd; PlanRead,
	// WaitDurable and State read them; purge and retention raise start, a
	// purge bumps epoch and extends lineage.
	start      uint64
	next       uint64 // next offset to hand out
	writtenEnd uint64 // end of what is written (page cache)
	syncedEnd  uint64 // end of what is fsynced
	epoch      fence.HistoryEpoch
	lineage    []fence.HistoryTransition
	maxTS      int64         // largest record timestamp so far
	gaps       []OffsetRange // skipped by recoveries; replaced, never modified

	// The read path (mu): the segments PlanRead resolves to (the flusher
	// appends and seals them, retention drops them), the tail cache the
	// flusher fills, and the channel that wakes waiters (long polls,
	// WaitDurable) when the log changes.
	segs    []*segment // by base; the last is the active one
	tail    tailCache
	changed chan struct{}

	// The append path (mu): what Append queues and the flusher takes each
	// round, the room an appender waits for, the producers' state that
	// Append checks and advances, and the appends that failed
	// (WaitDurable reports them).
	queue     []pending
	queued    int
	stage     *[]byte       // the staging chunk being filled
	roomCh    chan struct{} // closed when queue room frees
	producers map[fence.ProducerID]*fence.ProducerState
	failures  []failedRange

	// Work asked of the flusher (mu): a raise of the offset reservation
	// (by Append), a roll (by purge and idle seals), barriers (an fsync
	// and the durable producer state), a cleanup of files below the
	// start (by purge and retention, who wait for it, or by the syncer
	// once it sealed a segment that may lie there).
	extending     bool   // a raise of the reservation is wanted
	extendNeed    uint64 // the raise must cover offsets below this
	extendDone    chan struct{}
	resv          reservation // the last raise, which sizes the next
	rollWanted    bool
	barriers      []barrier
	cleanups      []chan struct{} // attempts waited for, closed when done
	cleanupWanted bool            // due anyway: a segment below the start was just sealed

	// The sync path (mu): the durable reservation and checkpoint, which
	// the flusher and the syncer advance and the next state write
	// records, and what is written but not yet fsynced (the segments,
	// each holding a reference; the producer records; whether directory
	// entries changed), which the flusher adds to and the syncer takes.
	ceiling      uint64     // durable reservation: offsets below it may be handed out
	checkpoint   checkpoint // newest durable point, written with the next state write
	unsyncedSegs []*segment
	unsyncedProd []prodRec
	prodCompact  int // length of unsyncedProd at which it is compacted
	dirDirty     bool

	// Lifecycle (mu): set once, read by every path.
	failed  error // appends refused until reopen
	corrupt error // *CorruptLogError: nothing is served
	closing error // ErrClosed or ErrTopicDeleted once stopping

	// cleanupPending mirrors the durable state's cleanupPending, for State
	// (which must not wait for a state write in progress).
	cleanupPending atomic.Bool

	// The pipeline's goroutines: the flusher's wake-up (capacity 1) and
	// end, its state (guarded by fl.turn: the flusher, or an appender
	// writing inline), and the syncer's (guarded by dur.mu).
	wake        chan struct{}
	flusherDone chan struct{}
	fl          flusher
	dur         durability

	recoveryDirDirty bool      // recovery removed a file the directory fsync must cover (Open only)
	stats            partStats // atomic counters
}

// pending is an appended batch waiting for the flusher. The queue holds
// it by value, and the flusher hands the queue's array back for the
// appends after its round, so an append allocates nothing for it.
type pending struct {
	b          []byte
	release    func()  // AppendOwned's: called once the partition lets go of b
	cached     bool    // written and kept by the tail cache
	chunk      *[]byte // the staging chunk holding a copy of b, at at
	at         int
	base, last uint64
	maxTS      int64
	prod       prodRec
	undo       producerUndo
}

type failedRange struct {
	base, last uint64
	err        error
}

// barrier asks the flusher to make everything appended below upTo durable
// and to report the durable producer state.
type barrier struct {
	upTo uint64
	ch   chan barrierResult
}

type barrierResult struct {
	snap producerSnapshot
	err  error
}

// AppendResult is the offsets assigned to an appended batch.
type AppendResult struct{ Base, Last uint64 }

// PartitionState is a partition's offsets and history.
type PartitionState struct {
	// LogStart is the first offset readers may ask for.
	LogStart uint64
	// HighWatermark is the exclusive end of what readers may see.
	HighWatermark uint64
	// History is the current history epoch.
	History fence.HistoryEpoch
	// Lineage is how each epoch began, in increasing epoch order.
	Lineage []fence.HistoryTransition
	// Gaps are the offset ranges above LogStart that a recovery skipped
	// (numbering resumed above the log's end after an unclean stop under
	// interval or none): they hold no record. In increasing order; shared,
	// so never modify it. See Skipped.
	Gaps []OffsetRange
	// Failed is non-nil when appends are refused until a restart (a failed
	// fsync), nothing is served (a corrupt log) or the topic was deleted
	// (ErrTopicDeleted).
	Failed error
	// CleanupPending: segment files below LogStart (left by a purge or by
	// retention) may still exist, because their removal is not yet known
	// to be durable. They are never served; the partition removes them
	// and, at the latest, the next Open does before serving.
	CleanupPending bool
}

// Topic returns the partition's topic.
func (p *Partition) Topic() *Topic { return p.t }

// Index returns the partition's number within its topic.
func (p *Partition) Index() int { return p.index }

// State returns the partition's current offsets and history.
func (p *Partition) State() PartitionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := PartitionState{
		LogStart:      p.start,
		HighWatermark: p.hwLocked(),
		History:       p.epoch,
		Lineage:       slices.Clone(p.lineage),
		Gaps:          p.gaps,
		Failed:        p.failed,

		CleanupPending: p.cleanupPending.Load(),
	}
	switch {
	case p.corrupt != nil:
		s.Failed = p.corrupt
	case s.Failed == nil && errors.Is(p.closing, ErrTopicDeleted):
		s.Failed = p.closing
	}
	return s
}

// ackEndLocked is the exclusive end of what the policy counts as durable.
func (p *Partition) ackEndLocked() uint64 {
	if p.cfg.Durability == DurabilityAlways {
		return p.syncedEnd
	}
	return p.writtenEnd
}

func (p *Partition) hwLocked() uint64 { return max(p.start, p.ackEndLocked()) }

// Changed returns a channel closed at the next change of the high
// watermark or of the partition's state (a purge, a failure, a close).
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changedLocked()
}

// changedLocked returns the channel the next notifyLocked closes. It is
// made only when someone asks for it: the appends of a partition nobody
// waits on (a producer whose acknowledgements need no wait, say) make no
// channel each.
func (p *Partition) changedLocked() chan struct{} {
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

func (p *Partition) notifyLocked() {
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// Append validates batch (magic, version, CRC, size, dense offsets),
// assigns its offsets, stamps its base offset (and, for append-time
// topics, its timestamps), and queues it for the durability pipeline. It
// returns with the offsets; WaitDurable says when they are acknowledged.
// Under interval and none, a small batch appended while the pipeline is
// idle is written to the log (page cache) before Append returns, by the
// caller's goroutine, instead of by the flusher. batch belongs to the
// engine from now on: it is cached and served to readers, so the caller
// must not modify it.
//
// Append waits only when the offset reservation is exhausted (a metadata
// fsync, normally done in the background) or when too many bytes await the
// flusher. Errors: ErrInvalidBatch (with the record package's error), ErrNoSpace is
// reported by WaitDurable, ErrPartitionFailed, ErrClosed, ErrTopicDeleted.
func (p *Partition) Append(batch []byte) (AppendResult, error) {
	return p.AppendOwned(batch, nil)
}

// AppendOwned is Append for a caller that wants batch's memory back: once
// the batch is written, unless the tail cache keeps it, the partition lets
// go of batch and calls release, on the goroutine that wrote it (the
// flusher's, or the appender's for a small batch written inline), with no
// lock of the partition held; release must not block. A batch the tail cache keeps, or whose write fails, is never
// released: it is left to the garbage collector. When AppendOwned returns
// an error the batch was not taken, and release is not called.
func (p *Partition) AppendOwned(batch []byte, release func()) (AppendResult, error) {
	h, err := record.VerifyBatch(batch, p.cfg.MaxBatchBytes)
	if err != nil {
		return AppendResult{}, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
	}
	if uint64(h.RecordCount) != uint64(h.LastOffsetDelta)+1 {
		return AppendResult{}, fmt.Errorf("%w: %d records span %d offsets (a producer's batch is dense)", ErrInvalidBatch, h.RecordCount, uint64(h.LastOffsetDelta)+1)
	}
	n := uint64(h.LastOffsetDelta) + 1
	if err := p.e.appendRoomErr(); err != nil {
		p.stats.noSpace.Add(1)
		return AppendResult{}, err
	}
	p.mu.Lock()
	for {
		if err := p.appendErrLocked(); err != nil {
			p.mu.Unlock()
			return AppendResult{}, err
		}
		if p.reserves() && p.next+n > p.ceiling {
			p.extendLocked(p.next + n)
			ch := p.extendDone
			p.mu.Unlock()
			p.wakeFlusher()
			<-ch
			p.mu.Lock()
			continue
		}
		if p.queued > 0 && p.queued+len(batch) > maxQueuedBytes {
			if p.roomCh == nil {
				p.roomCh = make(chan struct{})
			}
			ch := p.roomCh
			p.mu.Unlock()
			<-ch
			p.mu.Lock()
			continue
		}
		break
	}
	base := p.next
	p.next += n
	record.StampBaseOffset(batch, base)
	if p.cfg.Timestamps == TimestampAppend {
		now := p.e.opts.Now().UnixMilli()
		record.StampAppendTime(batch, now)
		h.MaxTimestamp = now
	}
	if p.reserves() && p.ceiling-p.next < p.resv.stepLocked(p.e.opts)/2 {
		p.extendLocked(0)
	}
	q := pending{b: batch, release: release, base: base, last: base + n - 1, maxTS: h.MaxTimestamp}
	if h.ProducerID != 0 {
		q.prod = prodRec{id: fence.ProducerID(h.ProducerID), epoch: fence.ProducerEpoch(h.ProducerEpoch),
			seq: h.BaseSequence, count: int32(h.RecordCount), base: q.base, last: q.last}
		q.undo = p.applyProducerLocked(q.prod)
	}
	p.stats.appends.Add(1)
	p.stats.appendedBytes.Add(uint64(len(batch)))
	if p.inlineLocked(&q) {
		p.mu.Unlock()
		p.writeInline(q)
		return AppendResult{Base: q.base, Last: q.last}, nil
	}
	p.stageLocked(&q)
	p.queue = append(p.queue, q)
	p.queued += len(batch)
	p.mu.Unlock()
	p.wakeFlusher()
	return AppendResult{Base: q.base, Last: q.last}, nil
}

func (p *Partition) appendErrLocked() error {
	switch {
	case p.closing != nil:
		return p.closing
	case p.corrupt != nil:
		return p.corrupt
	case p.failed != nil:
		return p.failed
	}
	return nil
}

// WaitDurable blocks until every offset up to off is durable per the
// topic's policy (none and interval: written to the page cache), or the
// append of off failed (ErrNoSpace, ErrPartitionFailed, ErrTopicDeleted,
// ErrClosed), or ctx is done.
func (p *Partition) WaitDurable(ctx context.Context, off uint64) error {
	for {
		p.mu.Lock()
		for i := len(p.failures) - 1; i >= 0; i-- {
			if f := p.failures[i]; off >= f.base && off <= f.last {
				p.mu.Unlock()
				return f.err
			}
		}
		if off < p.ackEndLocked() {
			p.mu.Unlock()
			return nil
		}
		if err := p.appendErrLocked(); err != nil {
			p.mu.Unlock()
			return err
		}
		if off >= p.next {
			p.mu.Unlock()
			return fmt.Errorf("engine: offset %d was not handed out (next is %d)", off, p.next)
		}
		ch := p.changedLocked()
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reserves reports whether the partition reserves offsets ahead of use.
// Under always it does not: a recovery resumes at the log's end, which
// holds every offset a reader or a producer saw, and never reads the
// ceiling.
func (p *Partition) reserves() bool { return p.cfg.Durability != DurabilityAlways }

// extendLocked asks the flusher to raise the durable offset reservation
// to cover at least need (and a step more); extendDone is closed once it
// did (or the partition stopped). The caller wakes the flusher.
func (p *Partition) extendLocked(need uint64) {
	p.extendNeed = max(p.extendNeed, need)
	if p.extending {
		return
	}
	p.extending = true
	p.extendDone = make(chan struct{})
}

// extendReservation makes the raise asked for by extendLocked: one synced
// metadata write. Run by the flusher, so that a partition's metadata
// writes are ordered with its file writes.
func (p *Partition) extendReservation() {
	p.mu.Lock()
	if !p.extending {
		p.mu.Unlock()
		return
	}
	step := p.resv.next(p.e.opts, p.e.opts.Now(), p.next, p.extendNeed > p.ceiling)
	target := max(p.next, p.extendNeed) + step
	if target <= p.ceiling {
		// The rate fell: what is reserved lasts long enough.
		p.endExtensionLocked()
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	err := p.writeState(func(s *partState) { s.ceiling = max(s.ceiling, target); s.clean = false }, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failLocked(err, nil)
	} else {
		p.ceiling = max(p.ceiling, target)
	}
	p.endExtensionLocked()
}

// endExtensionLocked releases the appenders waiting for a raise of the
// reservation; they look at the partition's state again.
func (p *Partition) endExtensionLocked() {
	if p.extending {
		p.extending, p.extendNeed = false, 0
		close(p.extendDone)
	}
}

// wakeFlusher wakes the flusher if it is waiting for work.
func (p *Partition) wakeFlusher() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// failLocked stops the partition from taking appends after a failed fsync
// or write; everything not yet acknowledged (the queue, and inflight, the
// batches the flusher was writing, oldest first) fails with the error.
//
// The flusher then records, synced, that the log may not be trusted past
// its newest durable checkpoint (markFailure): after a failed fsync the
// page cache may hold data the disk does not, and a recovery that found
// it and fsynced it again would serve data that a power loss can still
// take away.
func (p *Partition) failLocked(cause error, inflight []pending) {
	if p.failed == nil {
		p.failed = partitionFailed(cause)
		p.e.opts.Logger.Error("partition failed; restart to recover", "topic", p.t.name, "partition", p.index, "err", cause)
		p.wakeFlusher()
	}
	p.failQueueLocked(p.failed, inflight)
	p.notifyLocked()
}

// markFailure records that recovery must cut the log at the newest
// durable checkpoint. Run by the flusher once the partition failed.
func (p *Partition) markFailure() {
	err := p.writeState(func(s *partState) { s.cutAfterCheckpoint = true }, true)
	if err != nil {
		p.e.opts.Logger.Error("could not record the durable end of a failed partition; recovery keeps what it finds", "topic", p.t.name, "partition", p.index, "err", err)
	}
}

// failQueueLocked fails every queued batch (and the ones in flight, given
// oldest first) with err, undoing their producer-state changes.
func (p *Partition) failQueueLocked(err error, inflight []pending) {
	all := append(slices.Clone(inflight), p.queue...)
	for i := len(all) - 1; i >= 0; i-- {
		p.undoProducerLocked(&all[i].undo)
	}
	if len(all) > 0 {
		p.addFailureLocked(all[0].base, all[len(all)-1].last, err)
	}
	p.queue = nil
	p.queued = 0
	p.stage = nil
	p.freeRoomLocked()
}

func (p *Partition) addFailureLocked(base, last uint64, err error) {
	if n := len(p.failures); n > 0 && p.failures[n-1].err == err && p.failures[n-1].last+1 >= base {
		p.failures[n-1].last = max(p.failures[n-1].last, last)
		return
	}
	// Keep the most recent ranges only: a waiter asks about its own, recent
	// append.
	if len(p.failures) >= 256 {
		p.failures = slices.Delete(p.failures, 0, 128)
	}
	p.failures = append(p.failures, failedRange{base: base, last: last, err: err})
}

func (p *Partition) freeRoomLocked() {
	if p.roomCh != nil {
		close(p.roomCh)
		p.roomCh = nil
	}
}

// writeState applies mod to the durable partition state and writes it,
// synced or not. Every write carries the whole state, so a NoSync write
// never carries values that are not already durable or meant to be.
func (p *Partition) writeState(mod func(*partState), sync bool) error {
	return p.writeStateAndProducers(mod, nil, sync)
}

// writeStateAndProducers writes the partition state (with the newest
// durable checkpoint, then mod applied) and, if snap is not nil, a
// producer-state snapshot, in one metadata batch.
func (p *Partition) writeStateAndProducers(mod func(*partState), snap *producerSnapshot, sync bool) error {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	s := p.durable
	s.lineage = slices.Clone(s.lineage)
	p.mu.Lock()
	if cp := p.checkpoint; cp.seg > s.cp.seg || (cp.seg == s.cp.seg && cp.pos > s.cp.pos) {
		s.cp = cp
	}
	p.mu.Unlock()
	if mod != nil {
		mod(&s)
	}
	b := p.e.db.NewBatch()
	defer b.Close()
	if err := b.Set(partKey('P', p.t.id, p.index), sealPartState(&s), nil); err != nil {
		return err
	}
	if snap != nil {
		v, err := snap.encode()
		if err != nil {
			return err
		}
		if err := b.Set(partKey('R', p.t.id, p.index), seal(kindProducers, v), nil); err != nil {
			return err
		}
	}
	if err := p.e.commit(b, sync); err != nil {
		return err
	}
	p.durable = s
	p.cleanupPending.Store(s.cleanupPending())
	return nil
}

// segmentPath returns the file name of the segment starting at base.
func (p *Partition) segmentPath(base uint64, ext string) string {
	return p.e.fs.PathJoin(p.dir, fmt.Sprintf("%020d%s", base, ext))
}
