package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The durability pipeline. Each partition has one flusher goroutine that
// writes its files. The one exception is an append under interval or none
// that finds the pipeline idle (nothing queued, no other work asked of the
// flusher): a small batch is then written by its appender, holding the
// flusher's turn, exactly as the flusher's next round would write it, and
// saves the two hand-offs between goroutines that dominate the latency of
// a lone append. Otherwise Append copies each small batch (below
// directWriteBytes) into a staging chunk private to the pipeline, so that
// a run of them takes one write; that copy is made by the appender, so it
// overlaps the flusher's writes. Chunks are stagingChunkBytes long and are
// recycled through the engine's pool. A larger batch is written from the
// slice given to Append: one write per batch costs no more than a copy,
// and WriteAt never modifies what it is given (io.WriterAt; unlike
// vfs.File.Write), so the slice stays the one cached and served. Each
// round the flusher takes every queued batch and writes each chunk's run
// of them, and each large batch, with one call at the log's logical end;
// under interval and none, waiters (WaitDurable, long polls) are told about
// once per stagingChunkBytes written and at the end of the round. Under
// DurabilityAlways it then fsyncs
// once for everything written in the round (group commit) before the
// round's appends are acknowledged and visible; a round of
// overlapSyncBytes or more hands that fsync to the syncer and the flusher
// writes the next round while it runs (writeBatches). Under interval and none the
// fsyncs are the syncer's (syncer.go), so that a write never waits for one.
//
// The logical end is tracked in memory and every write goes there with
// WriteAt, because vfs has no Truncate: bytes beyond it (a torn tail cut at
// recovery, a write that failed half way) are garbage that a later write
// overwrites, that recovery never takes for batches (checksums, increasing
// offsets), and that is zeroed before the segment is sealed.
type flusher struct {
	// turn is held by whoever writes the partition's files: the flusher
	// for a whole round, or an appender writing its own batch in the
	// flusher's stead (writeInline). Everything below is guarded by it.
	turn    sync.Mutex
	wf      vfs.File // the active segment, opened for writing
	physEnd int64    // furthest byte ever written to the active file
	// kickSyncer: a segment was sealed in this round; the syncer is told
	// at the end of the round, so that its fsyncs never race the round's
	// writes for what they cover.
	kickSyncer bool
	// dirSyncFailed: an fsync of the partition directory made by a cleanup
	// failed. That directory's earlier changes are not trusted to be
	// durable before the next Open, so no cleanup is recorded as done.
	dirSyncFailed bool
	// failureMarked: markFailure ran.
	failureMarked bool
	// syncedRound: under DurabilityAlways, the last round's fsync was the
	// flusher's own (a small round), so gather may follow it.
	syncedRound bool
}

// maxSpareQueue is the most queue entries whose array a partition keeps
// between rounds. An entry holds a producer's state for its undo, so this
// is about 340 KiB, less than a staging chunk.
const maxSpareQueue = 1024

// stagingChunkBytes is the size of a staging chunk, and so of the largest
// writes of small batches.
const stagingChunkBytes = 512 << 10

// directWriteBytes is the size from which a batch is written from the
// slice given to Append (one write per batch, as a raw writer of such
// batches makes) instead of being copied into a staging chunk. WriteAt
// never modifies what it is given (io.WriterAt), so the slice stays the
// one cached and served.
const directWriteBytes = 32 << 10

// overlapSyncBytes is the size from which a round under DurabilityAlways
// hands its fsync to the syncer instead of making it itself, so that the
// next round's writes go on while it runs (RATIONALE.md, "A big round's
// fsync overlaps the next round's writes"). A smaller round's write takes
// little next to its fsync: overlapping it would save little and split
// the appenders that group commit's gather keeps together.
const overlapSyncBytes = 1 << 20

// runFlusher is the partition's flusher goroutine: one round per wake-up
// (takeRound, writeRound, finishRound), until a round finds the partition
// closing.
func (p *Partition) runFlusher() {
	defer close(p.flusherDone)
	f := &p.fl
	var released int           // appends the last fsync acknowledged
	var lastSync time.Duration // how long it took
	var spare []pending        // the array of the last round's batches, for the next queue
	defer func() {
		p.mu.Lock()
		p.endExtensionLocked()
		cleanups := p.cleanups
		p.cleanups = nil
		p.mu.Unlock()
		for _, c := range cleanups {
			close(c)
		}
	}()
	for {
		if released > 0 {
			p.gather(released, lastSync)
		}
		p.extendReservation()
		f.turn.Lock()
		r := p.takeRound(spare)
		released, lastSync, spare = p.writeRound(&r)
		p.finishRound(&r)
		if r.closing != nil {
			p.stopFlusher(r.closing, r.failed)
			// The turn stays taken: nothing is written after the last
			// round (appends are refused once closing is set).
			return
		}
		f.turn.Unlock()
		<-p.wake
	}
}

// round is what one round of the flusher took from the partition: the
// queued batches and the work asked of it since the last round.
type round struct {
	batch         []pending
	roll          bool // a roll is wanted (purge, seal)
	barriers      []barrier
	cleanups      []chan struct{}
	cleanupWanted bool
	closing       error
	failed        error // the partition's failure, then the round's
}

// takeRound takes the queue, and the work asked of the flusher, from the
// partition; the queue goes on in spare's array. A topic being deleted
// writes nothing more: its queue is failed here.
func (p *Partition) takeRound(spare []pending) round {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := round{
		batch: p.queue, roll: p.rollWanted, barriers: p.barriers,
		cleanups: p.cleanups, cleanupWanted: p.cleanupWanted,
		closing: p.closing, failed: p.failed,
	}
	p.queue, p.queued, p.stage = spare, 0, nil // the chunks go with the batches
	p.freeRoomLocked()
	p.rollWanted, p.barriers = false, nil
	p.cleanups, p.cleanupWanted = nil, false
	if r.failed == nil && r.closing != nil && !errors.Is(r.closing, ErrClosed) {
		p.failQueueLocked(r.closing, r.batch)
		p.notifyLocked()
		r.batch = nil
	}
	return r
}

// writeRound writes the round's batches, unless the partition has failed,
// and returns their array for a later round's queue. Under
// DurabilityAlways, released is how many appends the round's fsync
// acknowledged and took how long it took (for gather), when the flusher
// made that fsync itself.
func (p *Partition) writeRound(r *round) (released int, took time.Duration, spare []pending) {
	if len(r.batch) > 0 && r.failed == nil {
		t0 := time.Now()
		p.fl.syncedRound = false
		r.failed = p.writeBatches(r.batch)
		if p.cfg.Durability == DurabilityAlways && r.failed == nil && p.fl.syncedRound {
			released, took = len(r.batch), time.Since(t0)
		}
	}
	p.recycleChunks(r.batch)
	// Nothing refers to the round's entries any more (the tail cache
	// keeps slices of its own, and every release was called): their
	// array takes the next round's appends, unless a burst made it
	// large.
	clear(r.batch)
	if cap(r.batch) <= maxSpareQueue {
		spare = r.batch[:0]
	}
	return released, took, spare
}

// finishRound does the rest of the round's work after its writes: the
// roll, the fsync the barriers and a close wait for, the cleanup; it
// kicks the syncer if a segment was sealed, and marks the partition
// failed if the round failed it.
func (p *Partition) finishRound(r *round) {
	f := &p.fl
	rollBlocked := false // the disk had no room for the roll
	if r.roll && r.failed == nil {
		r.failed, rollBlocked = p.rollWhenRoom()
	}
	if r.failed == nil && (len(r.barriers) > 0 || r.closing != nil) {
		r.failed = p.syncNow()
	}
	for _, b := range r.barriers {
		if r.failed != nil {
			b.ch <- barrierResult{err: r.failed}
			continue
		}
		b.ch <- barrierResult{snap: p.durableProducers()}
	}
	if r.failed == nil && r.closing == nil && (len(r.cleanups) > 0 || r.cleanupWanted) {
		r.failed = p.cleanup(len(r.cleanups) > 0)
		if r.failed == nil && rollBlocked {
			// The files the cleanup removed may have given the roll
			// the room it lacked (a purge on a full disk): roll, and
			// remove the segment it sealed if that is wanted too.
			if r.failed, rollBlocked = p.rollWhenRoom(); r.failed == nil && !rollBlocked {
				r.failed = p.cleanup(len(r.cleanups) > 0)
			}
		}
	}
	for _, c := range r.cleanups {
		close(c)
	}
	if f.kickSyncer {
		f.kickSyncer = false
		p.kickSyncer()
	}
	if r.failed == nil {
		r.failed = p.failure()
	}
	if r.failed != nil && !f.failureMarked {
		f.failureMarked = true
		p.markFailure()
	}
}

// stopFlusher ends the last round, of a partition closing for reason
// closing: it stops the syncer, records a clean shutdown unless the
// partition failed or its topic is being deleted, and closes the active
// file.
func (p *Partition) stopFlusher(closing, failed error) {
	f := &p.fl
	p.stopSyncer()
	if failed == nil && errors.Is(closing, ErrClosed) {
		p.finishClean()
	}
	if f.wf != nil {
		_ = f.wf.Close()
		f.wf = nil
	}
}

// recycleChunks returns the staging chunks of a written round to the pool.
func (p *Partition) recycleChunks(batch []pending) {
	var last *[]byte
	for i := range batch {
		q := &batch[i]
		if q.chunk != last && q.chunk != nil {
			last = q.chunk
			if cap(*q.chunk) == stagingChunkBytes {
				*q.chunk = (*q.chunk)[:0]
				p.e.chunks.Put(q.chunk)
			}
		}
		q.chunk = nil
	}
}

// stageLocked copies a small batch into the current staging chunk,
// starting a new one when it does not fit. A batch of directWriteBytes or
// more is not copied: it is written from its own slice.
func (p *Partition) stageLocked(q *pending) {
	if len(q.b) >= directWriteBytes {
		return
	}
	c := p.stage
	if c == nil || cap(*c)-len(*c) < len(q.b) {
		if v, ok := p.e.chunks.Get().(*[]byte); ok {
			c = v
		} else {
			nc := make([]byte, 0, stagingChunkBytes)
			c = &nc
		}
		p.stage = c
	}
	q.chunk, q.at = c, len(*c)
	*c = append(*c, q.b...)
}

// inlineWriteBytes is the size below which an append under interval or
// none may write its batch itself (writeInline) when the flusher is idle.
// Larger batches come in pipelined runs, which the flusher turns into
// fewer, larger writes while the appender goes on.
const inlineWriteBytes = 8 << 10

// inlineLocked reports whether the append of q may be written by its
// appender rather than handed to the flusher, and if so takes the
// flusher's turn. It may when the policy has no group commit (interval,
// none: a write never waits for an fsync), the batch is small, nothing is
// queued before it, and the flusher has nothing else to do, so that the
// write is exactly the one the flusher's next round would make, in the
// same order with respect to every other file and metadata operation of
// the partition. It saves the hand-off to the flusher and back, which is
// most of an idle partition's append latency.
func (p *Partition) inlineLocked(q *pending) bool {
	if p.cfg.Durability == DurabilityAlways || len(q.b) >= inlineWriteBytes || len(p.queue) > 0 ||
		p.extending || p.rollWanted || len(p.barriers) > 0 || len(p.cleanups) > 0 || p.cleanupWanted {
		return false
	}
	return p.fl.turn.TryLock()
}

// writeInline writes q, which inlineLocked let its appender write, as a
// flusher round of that one batch would, and gives the turn back. The
// rest of a round is not due or is someone else's: a sealed segment is
// the syncer's (told here, as at the end of a round), a failure is
// recorded by the flusher (failLocked wakes it), and batches appended
// meanwhile woke the flusher when they were queued.
func (p *Partition) writeInline(q pending) {
	f := &p.fl
	_ = p.writeBatches([]pending{q})
	kick := f.kickSyncer
	f.kickSyncer = false
	f.turn.Unlock()
	if kick {
		p.kickSyncer()
	}
}

// gather is group commit's one concession to latency. An fsync just
// acknowledged released appends, whose appenders typically append again
// at once; starting the next round before they do would split them into
// two alternating groups, each paying its own fsync. So the flusher waits
// until as many appends are queued as were released, or for half of
// the last fsync's duration (at most 1 ms), whichever comes first.
func (p *Partition) gather(released int, lastSync time.Duration) {
	wait := min(lastSync/2, time.Millisecond)
	if wait <= 0 {
		return
	}
	var timer *time.Timer
	for {
		p.mu.Lock()
		enough := len(p.queue) >= released || p.closing != nil || p.failed != nil || len(p.barriers) > 0 ||
			p.extending || len(p.cleanups) > 0
		p.mu.Unlock()
		if enough {
			break
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-p.wake:
		case <-timer.C:
			return
		}
	}
	// Keep the wake-up for the loop: the queue is not empty.
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// writeBatches writes batch (oldest first) to the log, rolling segments as
// needed: one write per run of batches staged in one chunk (nextRun). It
// returns the partition's failure, if the round caused one or found one
// (a failed fsync of the syncer's): nothing more is written then.
//
// Under DurabilityAlways the round's fsync follows its last write: made
// here, or, for a round of overlapSyncBytes or more, handed to the syncer,
// and the flusher goes on to the next round's writes while it runs. Either
// way syncOnce acknowledges only what was written before it began, so a
// later round's writes wait for an fsync of their own.
func (p *Partition) writeBatches(batch []pending) error {
	f := &p.fl
	now := p.e.clock.now()
	var written int    // bytes written in this call
	var unnotified int // bytes written that waiters were not told of
	defer func() {
		if unnotified > 0 {
			p.mu.Lock()
			p.notifyLocked()
			p.mu.Unlock()
		}
	}()
	for len(batch) > 0 {
		seg, err := p.segmentFor(&batch[0], now)
		if err != nil {
			p.mu.Lock()
			defer p.mu.Unlock()
			if errors.Is(err, ErrNoSpace) {
				p.refuseNoSpaceLocked(err, batch)
				return nil
			}
			p.failQueueLocked(p.failed, batch)
			return err
		}
		run, buf := p.nextRun(batch, seg)
		pos := seg.size
		_, err = f.wf.WriteAt(buf, pos)
		p.stats.writes.Add(1)
		// On an error, what the write left past the logical end is
		// garbage that the next write overwrites or the roll zeroes.
		f.physEnd = max(f.physEnd, pos+int64(len(buf)))
		if err != nil {
			return p.writeFailed(seg, pos, err, batch)
		}
		written += len(buf)
		if p.cfg.Durability != DurabilityAlways {
			// Waiters learn of the round's writes about once per staging
			// chunk's worth of bytes, and at its end.
			unnotified += len(buf)
		}
		notify := unnotified >= stagingChunkBytes || (unnotified > 0 && len(run) == len(batch))
		p.noteWritten(seg, run, pos, now, notify)
		if notify {
			unnotified = 0
		}
		batch = batch[len(run):]
		if p.cfg.Durability == DurabilityAlways && len(batch) == 0 {
			if written >= overlapSyncBytes && p.dur.kick != nil {
				p.kickSyncer() // the next round is written while it fsyncs
			} else if err := p.syncOnce(f.wf); err != nil {
				return err
			} else {
				f.syncedRound = true
			}
		}
	}
	return nil
}

// segmentFor returns the segment that q is written to: the active one,
// unless there is none yet, or q does not fit in it, or it is older than
// the topic's segment age, or it lies below the start (a purge): then a
// new one, rolled at q's base. A failed partition writes nothing more: it
// returns the failure.
func (p *Partition) segmentFor(q *pending, now int64) (*segment, error) {
	p.mu.Lock()
	if err := p.failed; err != nil {
		p.mu.Unlock()
		return nil, err
	}
	var seg *segment
	if n := len(p.segs); n > 0 {
		seg = p.segs[n-1]
	}
	start := p.start
	p.mu.Unlock()
	if seg == nil || (seg.size > 0 && (seg.size+int64(len(q.b)) > p.cfg.SegmentBytes ||
		now-seg.effCreated >= p.cfg.SegmentAge.Milliseconds() || seg.end <= start)) {
		if err := p.roll(q.base); err != nil {
			return nil, err
		}
		seg = p.active()
	}
	return seg, nil
}

// nextRun returns the batches at the front of batch that go in one write
// to seg, and the bytes of that write: the run of batches staged together
// in one chunk that fits in the segment, or one batch written from its
// own slice.
func (p *Partition) nextRun(batch []pending, seg *segment) ([]pending, []byte) {
	first := &batch[0]
	n, size := 1, seg.size+int64(len(first.b))
	for first.chunk != nil && n < len(batch) && batch[n].chunk == first.chunk && size+int64(len(batch[n].b)) <= p.cfg.SegmentBytes {
		size += int64(len(batch[n].b))
		n++
	}
	if first.chunk != nil {
		return batch[:n], (*first.chunk)[first.at : first.at+int(size-seg.size)]
	}
	return batch[:n], first.b
}

// writeFailed handles a write of seg at pos that failed with err: a full
// disk refuses the round's remaining batches and the partition goes on;
// any other error fails the partition, which it returns.
func (p *Partition) writeFailed(seg *segment, pos int64, err error, batch []pending) error {
	noSpace := IsDiskFull(err)
	if noSpace {
		p.e.noteDiskFull("append", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if noSpace {
		p.refuseNoSpaceLocked(fmt.Errorf("%w: %v", ErrNoSpace, err), batch)
		return nil
	}
	p.failLocked(fmt.Errorf("write %s at %d: %w", seg.path, pos, err), batch)
	return p.failed
}

// noteWritten records the run of batches written to seg at pos: the
// segment's index and size, the log's written end, the tail cache, the
// producer records and segment awaiting an fsync; with notify, waiters
// are told. Then it hands each batch not kept by the tail cache back to
// its owner, outside the lock, so that the owner may take it back at once.
func (p *Partition) noteWritten(seg *segment, run []pending, pos, now int64, notify bool) {
	p.mu.Lock()
	interval := int64(p.e.opts.IndexIntervalBytes)
	at := pos
	for i := range run {
		q := &run[i]
		seg.addBatch(at, q.base, q.last, q.maxTS, &p.maxTS, interval)
		at += int64(len(q.b))
		p.writtenEnd = q.last + 1
		q.cached = p.tailAddLocked(q, now)
		if q.prod.id != 0 {
			p.noteUnsyncedProdLocked(q.prod)
		}
	}
	seg.size = at
	seg.effLast = now
	p.noteUnsyncedLocked(seg)
	if notify {
		p.notifyLocked()
	}
	p.mu.Unlock()
	for i := range run {
		if q := &run[i]; q.release != nil && !q.cached {
			q.release()
		}
	}
}

// refuseNoSpaceLocked refuses batch, which found the disk full: its
// appends fail with err (ErrNoSpace, retryable) and the partition goes on.
func (p *Partition) refuseNoSpaceLocked(err error, batch []pending) {
	p.stats.noSpace.Add(uint64(len(batch)))
	p.e.opts.Logger.Warn("disk full; append refused", "topic", p.t.name, "partition", p.index)
	p.failQueueLocked(err, batch)
	p.notifyLocked()
}

// failure returns the partition's failure, if any.
func (p *Partition) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// finishClean runs at a clean close after the last fsync: it writes the
// active segment's index so a restart need not scan it.
func (p *Partition) finishClean() {
	seg := p.active()
	if seg == nil {
		return
	}
	p.mu.Lock()
	idx := seg.encodeIndex()
	p.mu.Unlock()
	if err := writeIndexFile(p.e.fs, seg, idx); err == nil {
		_ = syncDir(p.e.fs, p.dir)
	}
}
