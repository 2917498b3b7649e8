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
// round's appends are acknowledged and visible. Under interval and none the
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
			released = 0
		}
		p.extendReservation()
		f.turn.Lock()
		p.mu.Lock()
		batch := p.queue
		p.queue, p.queued, p.stage = spare, 0, nil // the chunks go with the batches
		spare = nil
		p.freeRoomLocked()
		roll := p.rollWanted
		p.rollWanted = false
		barriers := p.barriers
		p.barriers = nil
		cleanups, cleanupWanted := p.cleanups, p.cleanupWanted
		p.cleanups, p.cleanupWanted = nil, false
		closing, failed := p.closing, p.failed
		if failed == nil && closing != nil && !errors.Is(closing, ErrClosed) {
			// The topic is being deleted: nothing queued will be written.
			p.failQueueLocked(closing, batch)
			p.notifyLocked()
			batch = nil
		}
		p.mu.Unlock()

		if len(batch) > 0 && failed == nil {
			syncs, t0 := p.stats.syncs.Load(), time.Now()
			failed = p.writeBatches(batch)
			if p.cfg.Durability == DurabilityAlways && failed == nil && p.stats.syncs.Load() > syncs {
				released, lastSync = len(batch), time.Since(t0)
			}
		}
		p.recycleChunks(batch)
		// Nothing refers to the round's entries any more (the tail cache
		// keeps slices of its own, and every release was called): their
		// array takes the next round's appends, unless a burst made it
		// large.
		clear(batch)
		if cap(batch) <= maxSpareQueue {
			spare = batch[:0]
		}
		rollBlocked := false // the disk had no room for the roll
		if roll && failed == nil {
			failed, rollBlocked = p.rollWhenRoom()
		}
		if failed == nil && (len(barriers) > 0 || closing != nil) {
			failed = p.syncNow()
		}
		for _, b := range barriers {
			if failed != nil {
				b.ch <- barrierResult{err: failed}
				continue
			}
			b.ch <- barrierResult{snap: p.durableProducers()}
		}
		if failed == nil && closing == nil && (len(cleanups) > 0 || cleanupWanted) {
			failed = p.cleanup(len(cleanups) > 0)
			if failed == nil && rollBlocked {
				// The files the cleanup removed may have given the roll
				// the room it lacked (a purge on a full disk): roll, and
				// remove the segment it sealed if that is wanted too.
				if failed, rollBlocked = p.rollWhenRoom(); failed == nil && !rollBlocked {
					failed = p.cleanup(len(cleanups) > 0)
				}
			}
		}
		for _, c := range cleanups {
			close(c)
		}
		if f.kickSyncer {
			f.kickSyncer = false
			p.kickSyncer()
		}
		if failed == nil {
			failed = p.failure()
		}
		if failed != nil && !f.failureMarked {
			f.failureMarked = true
			p.markFailure()
		}
		if closing != nil {
			p.stopSyncer()
			if failed == nil && errors.Is(closing, ErrClosed) {
				p.finishClean()
			}
			if f.wf != nil {
				_ = f.wf.Close()
				f.wf = nil
			}
			// The turn stays taken: nothing is written after the last
			// round (appends are refused once closing is set).
			return
		}
		f.turn.Unlock()
		<-p.wake
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

// nextWriteBase is the base offset for a new segment: the first offset not
// yet written.
func (p *Partition) nextWriteBase() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) > 0 {
		return p.queue[0].base
	}
	return max(p.writtenEnd, p.start)
}

func (p *Partition) active() *segment {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.segs) == 0 {
		return nil
	}
	return p.segs[len(p.segs)-1]
}

// writeBatches writes batch (oldest first) to the log, rolling segments as
// needed. It returns the partition's failure, if the round caused one.
func (p *Partition) writeBatches(batch []pending) error {
	f := &p.fl
	now := p.e.clock.now()
	var unnotified int // bytes written that waiters were not told of
	defer func() {
		if unnotified > 0 {
			p.mu.Lock()
			p.notifyLocked()
			p.mu.Unlock()
		}
	}()
	for len(batch) > 0 {
		p.mu.Lock()
		var seg *segment
		if n := len(p.segs); n > 0 {
			seg = p.segs[n-1]
		}
		start := p.start
		p.mu.Unlock()
		if seg == nil || (seg.size > 0 && (seg.size+int64(len(batch[0].b)) > p.cfg.SegmentBytes ||
			now-seg.effCreated >= p.cfg.SegmentAge.Milliseconds() || seg.end <= start)) {
			if err := p.roll(batch[0].base); err != nil {
				p.mu.Lock()
				defer p.mu.Unlock()
				if errors.Is(err, ErrNoSpace) {
					p.refuseNoSpaceLocked(err, batch)
					return nil
				}
				p.failQueueLocked(p.failed, batch)
				return err
			}
			seg = p.active()
		}
		// One write per run of batches staged together in one chunk that
		// fits in the segment, or per batch written from its own slice.
		first := &batch[0]
		n, size := 1, seg.size+int64(len(first.b))
		for first.chunk != nil && n < len(batch) && batch[n].chunk == first.chunk && size+int64(len(batch[n].b)) <= p.cfg.SegmentBytes {
			size += int64(len(batch[n].b))
			n++
		}
		chunk := batch[:n]
		buf := first.b
		if first.chunk != nil {
			buf = (*first.chunk)[first.at : first.at+int(size-seg.size)]
		}
		pos := seg.size
		_, err := f.wf.WriteAt(buf, pos)
		p.stats.writes.Add(1)
		if err != nil {
			// What a failed write left past the logical end is garbage
			// that the next write overwrites or the roll zeroes.
			f.physEnd = max(f.physEnd, pos+int64(len(buf)))
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
		f.physEnd = max(f.physEnd, pos+int64(len(buf)))
		p.mu.Lock()
		interval := int64(p.e.opts.IndexIntervalBytes)
		at := pos
		for i := range chunk {
			q := &chunk[i]
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
		if p.cfg.Durability != DurabilityAlways {
			// Waiters learn of the round's writes about once per staging
			// chunk's worth of bytes, and at its end.
			if unnotified += len(buf); unnotified >= stagingChunkBytes || n == len(batch) {
				p.notifyLocked()
				unnotified = 0
			}
		}
		p.mu.Unlock()
		// Outside the lock: the owners of the batches may take them back
		// at once.
		for i := range chunk {
			if q := &chunk[i]; q.release != nil && !q.cached {
				q.release()
			}
		}
		batch = batch[n:]
		if p.cfg.Durability == DurabilityAlways && len(batch) == 0 {
			if err := p.syncOnce(f.wf); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *Partition) startOffset() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start
}

// refuseNoSpaceLocked refuses batch, which found the disk full: its
// appends fail with err (ErrNoSpace, retryable) and the partition goes on.
func (p *Partition) refuseNoSpaceLocked(err error, batch []pending) {
	p.stats.noSpace.Add(uint64(len(batch)))
	p.e.opts.Logger.Warn("disk full; append refused", "topic", p.t.name, "partition", p.index)
	p.failQueueLocked(err, batch)
	p.notifyLocked()
}

// rollWhenRoom rolls at the next write base, as a purge or a seal asks.
// A disk too full for the roll is no failure: the roll stays wanted and
// is made by a later round (blocked reports it).
func (p *Partition) rollWhenRoom() (failed error, blocked bool) {
	err := p.roll(p.nextWriteBase())
	if err == nil || !errors.Is(err, ErrNoSpace) {
		return err, false
	}
	p.mu.Lock()
	p.rollWanted = true
	p.mu.Unlock()
	return nil, true
}

// roll seals the active segment and starts a new one. A new segment's base
// is the end of the one before (base is used only for the first segment),
// so that recovery can tell a sealed segment that lost its tail. Sealing
// zeroes any garbage past the old segment's logical end; its fsync, its
// index file and the directory fsync that makes the new file's entry
// durable are done by the next sync (syncOnce), before anything in the new
// segment counts as durable.
//
// The zeroing is what lets a sealed segment be read without its index:
// recovery finds a segment's end by checksums, and a write that failed
// half way (a full disk) may have left whole batches there, refused to
// their producers, that a scan would otherwise take for records. Zeros
// past the end are padding, never a torn tail or corruption. Only bytes
// the file holds are zeroed: past its size nothing was written, whatever
// a failed write was asked to write. Overwriting them takes no new room
// on a file system that writes in place, so a full disk does not stop a
// seal; one that needs room even so (copy-on-write) makes roll return
// ErrNoSpace, the partition unchanged, the segment still active.
func (p *Partition) roll(base uint64) error {
	f := &p.fl
	old := p.active()
	if old != nil {
		if old.size == 0 {
			return nil // an empty active segment takes the batch as is
		}
		p.mu.Lock()
		base = old.end
		p.mu.Unlock()
	}
	fail := func(err error) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.failLocked(err, nil)
		return p.failed
	}
	if old != nil && f.physEnd > old.size {
		end := f.physEnd
		if st, err := f.wf.Stat(); err == nil {
			end = min(end, st.Size())
		}
		if end > old.size {
			if _, err := f.wf.WriteAt(make([]byte, end-old.size), old.size); err != nil {
				if IsDiskFull(err) {
					p.e.noteDiskFull("seal", err)
					return fmt.Errorf("%w: zero the tail of %s: %v", ErrNoSpace, old.path, err)
				}
				return fail(fmt.Errorf("zero the tail of %s: %w", old.path, err))
			}
			p.mu.Lock()
			p.noteUnsyncedLocked(old)
			p.mu.Unlock()
		}
		f.physEnd = old.size
	}
	path := p.segmentPath(base, segmentExt)
	wf, rf, err := createSegmentFile(p.e.fs, path)
	if err != nil {
		if IsDiskFull(err) {
			p.e.noteDiskFull("seal", err)
			return fmt.Errorf("%w: %v", ErrNoSpace, err)
		}
		return fail(err)
	}
	seg := newSegment(base, path, rf)
	seg.effCreated = p.e.clock.now()
	seg.effLast = seg.effCreated
	p.mu.Lock()
	seg.maxTS = p.maxTS
	if old != nil {
		old.sealed = true
		p.noteUnsyncedLocked(old)
	}
	p.segs = append(p.segs, seg)
	p.dirDirty = true
	p.mu.Unlock()
	if f.wf != nil {
		_ = f.wf.Close()
	}
	f.wf, f.physEnd = wf, 0
	if p.cfg.Durability == DurabilityAlways {
		// Seal now: the next acknowledgement must not wait for it.
		if err := p.syncOnce(nil); err != nil {
			return err
		}
	} else {
		f.kickSyncer = true
	}
	return nil
}

// failure returns the partition's failure, if any.
func (p *Partition) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// createSegmentFile creates an empty log file and opens it for positional
// writes and for reads.
func createSegmentFile(fs vfs.FS, path string) (wf, rf vfs.File, err error) {
	c, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := c.Close(); err != nil {
		return nil, nil, err
	}
	wf, err = fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, nil, err
	}
	rf, err = fs.Open(path)
	if err != nil {
		_ = wf.Close()
		return nil, nil, err
	}
	return wf, rf, nil
}

// syncDir fsyncs a directory, so that files created, renamed or removed in
// it stay so after a power loss.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return d.Close()
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
