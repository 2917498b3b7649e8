package engine

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/fence"
)

// The durability pipeline. Each partition has one flusher goroutine, the
// only one that writes or fsyncs its files, so Write and Sync never run
// concurrently on one vfs.File. Each round it takes every queued batch,
// copies them into its own buffer (vfs.File.Write may modify what it is
// given, and the appended slices are cached and served), writes that
// buffer with one call at the log's logical end, and, when the policy asks,
// fsyncs once for all of them: group commit.
//
// The logical end is tracked in memory and every write goes there with
// WriteAt, because vfs has no Truncate: bytes beyond it (a torn tail cut at
// recovery, a write that failed half way) are garbage that a later write
// overwrites, that recovery never takes for batches (checksums, increasing
// offsets), and that is zeroed before the segment is sealed.
type flusher struct {
	wf        vfs.File // the active segment, opened for writing
	wbuf      []byte
	dirty     bool  // written since the last fsync
	physEnd   int64 // furthest byte ever written to the active file
	lastSync  time.Time
	unsynced  []prodRec
	durProd   map[fence.ProducerID]*fence.ProducerState
	durAsOf   uint64
	writeErrs int
}

func (p *Partition) runFlusher() {
	defer close(p.flusherDone)
	f := &p.fl
	var timer *time.Timer
	var timerC <-chan time.Time
	for {
		p.mu.Lock()
		batch := p.queue
		p.queue, p.queued = nil, 0
		p.freeRoomLocked()
		roll := p.rollWanted
		p.rollWanted = false
		barriers := p.barriers
		p.barriers = nil
		closing, failed := p.closing, p.failed
		if failed == nil && closing != nil && !errors.Is(closing, ErrClosed) {
			// The topic is being deleted: nothing queued will be written.
			p.failQueueLocked(closing, batch)
			p.notifyLocked()
			batch = nil
		}
		p.mu.Unlock()

		if len(batch) > 0 && failed == nil {
			failed = p.writeBatches(batch)
		}
		if roll && failed == nil {
			failed = p.roll(p.nextWriteBase())
		}
		interval := p.cfg.Durability == DurabilityInterval && time.Since(f.lastSync) >= p.cfg.SyncInterval
		if f.dirty && failed == nil && (p.cfg.Durability == DurabilityAlways || interval || len(barriers) > 0 || closing != nil) {
			failed = p.syncActive()
		}
		for _, b := range barriers {
			if failed != nil {
				b.ch <- barrierResult{err: failed}
				continue
			}
			b.ch <- barrierResult{snap: producerSnapshot{asOf: f.durAsOf, state: cloneProducers(f.durProd)}}
		}
		if closing != nil {
			if failed == nil && errors.Is(closing, ErrClosed) {
				p.finishClean()
			}
			if f.wf != nil {
				_ = f.wf.Close()
				f.wf = nil
			}
			if timer != nil {
				timer.Stop()
			}
			return
		}
		if f.dirty && failed == nil && p.cfg.Durability == DurabilityInterval && timerC == nil {
			d := p.cfg.SyncInterval - time.Since(f.lastSync)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			timerC = timer.C
		}
		select {
		case <-p.wake:
		case <-timerC:
			timerC = nil
		}
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
func (p *Partition) writeBatches(batch []*pending) error {
	f := &p.fl
	for len(batch) > 0 {
		seg := p.active()
		now := p.e.clock.now()
		if seg == nil || (seg.size > 0 && (seg.size+int64(len(batch[0].b)) > p.cfg.SegmentBytes ||
			now-seg.effCreated >= p.cfg.SegmentAge.Milliseconds() || seg.end <= p.startOffset())) {
			if err := p.roll(batch[0].base); err != nil {
				p.mu.Lock()
				p.failQueueLocked(p.failed, batch)
				p.mu.Unlock()
				return err
			}
			seg = p.active()
		}
		// Coalesce what fits in the segment.
		n, size := 0, seg.size
		for n < len(batch) && (n == 0 || size+int64(len(batch[n].b)) <= p.cfg.SegmentBytes) {
			size += int64(len(batch[n].b))
			n++
		}
		chunk := batch[:n]
		f.wbuf = f.wbuf[:0]
		for _, q := range chunk {
			f.wbuf = append(f.wbuf, q.b...)
		}
		pos := seg.size
		_, err := f.wf.WriteAt(f.wbuf, pos)
		if err != nil {
			f.physEnd = max(f.physEnd, pos+int64(len(f.wbuf)))
			f.writeErrs++
			noSpace := errors.Is(err, syscall.ENOSPC)
			if noSpace {
				p.e.releaseBallast()
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if noSpace {
				p.e.opts.Logger.Warn("disk full; append refused", "topic", p.t.name, "partition", p.index)
				p.failQueueLocked(fmt.Errorf("%w: %v", ErrNoSpace, err), batch)
				p.notifyLocked()
				return nil
			}
			p.failLocked(fmt.Errorf("write %s at %d: %w", seg.path, pos, err), batch)
			return p.failed
		}
		f.physEnd = max(f.physEnd, pos+int64(len(f.wbuf)))
		f.dirty = true
		p.mu.Lock()
		interval := int64(p.e.opts.IndexIntervalBytes)
		at := pos
		for _, q := range chunk {
			seg.addBatch(at, q.base, q.last, q.maxTS, &p.maxTS, interval)
			at += int64(len(q.b))
			p.writtenEnd = q.last + 1
			p.tailAddLocked(q)
			if q.prod.id != 0 {
				f.unsynced = append(f.unsynced, q.prod)
			}
		}
		seg.size = at
		seg.effLast = now
		if p.cfg.Durability != DurabilityAlways {
			p.notifyLocked()
		}
		p.mu.Unlock()
		batch = batch[n:]
	}
	return nil
}

func (p *Partition) startOffset() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start
}

// syncActive fsyncs the active segment. A failed fsync is never retried:
// the partition fails and what was not durable is not acknowledged.
func (p *Partition) syncActive() error {
	f := &p.fl
	p.mu.Lock()
	target := p.writtenEnd
	seg := p.segs[len(p.segs)-1]
	size := seg.size
	p.mu.Unlock()
	if err := f.wf.SyncData(); err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.failLocked(fmt.Errorf("fsync %s: %w", seg.path, err), nil)
		return p.failed
	}
	f.dirty = false
	f.lastSync = time.Now()
	for _, r := range f.unsynced {
		applyProducer(f.durProd, r)
	}
	f.unsynced = f.unsynced[:0]
	f.durAsOf = target
	p.mu.Lock()
	p.syncedEnd = max(p.syncedEnd, target)
	// The newest durable point is written with the next state write (a
	// reservation, a roll, a purge, a close).
	p.checkpoint = checkpoint{seg: seg.base, pos: size, end: target}
	if p.cfg.Durability == DurabilityAlways {
		p.notifyLocked()
	}
	p.mu.Unlock()
	return nil
}

// roll seals the active segment (fsync, zero any garbage past its logical
// end, write its index) and starts a new one at base: created, fsynced
// directory, then used.
func (p *Partition) roll(base uint64) error {
	f := &p.fl
	old := p.active()
	if old != nil && old.size == 0 && old.base <= base {
		return nil // an empty active segment takes the batch as is
	}
	fail := func(err error) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.failLocked(err, nil)
		return p.failed
	}
	if old != nil {
		if f.physEnd > old.size {
			if _, err := f.wf.WriteAt(make([]byte, f.physEnd-old.size), old.size); err != nil {
				return fail(fmt.Errorf("zero the tail of %s: %w", old.path, err))
			}
			f.dirty = true
		}
		if f.dirty {
			if err := p.syncActive(); err != nil {
				return err
			}
		}
		p.mu.Lock()
		idx := old.encodeIndex()
		p.mu.Unlock()
		if err := writeIndexFile(p.e.fs, old, idx); err != nil {
			return fail(fmt.Errorf("write index of %s: %w", old.path, err))
		}
	}
	path := p.segmentPath(base, ".log")
	wf, rf, err := createSegmentFile(p.e.fs, path)
	if err != nil {
		return fail(err)
	}
	if err := syncDir(p.e.fs, p.dir); err != nil {
		_ = wf.Close()
		_ = rf.Close()
		return fail(err)
	}
	seg := newSegment(base, path, rf)
	seg.effCreated = p.e.clock.now()
	seg.effLast = seg.effCreated
	p.mu.Lock()
	seg.maxTS = p.maxTS
	if old != nil {
		old.sealed = true
	}
	p.segs = append(p.segs, seg)
	// Everything before the new segment is durable: checkpoint it with the
	// producer state, so recovery need not read sealed segments.
	p.checkpoint = checkpoint{seg: base, pos: 0, end: p.writtenEnd}
	p.mu.Unlock()
	if f.wf != nil {
		_ = f.wf.Close()
	}
	f.wf, f.physEnd, f.dirty = wf, 0, false
	if old != nil {
		snap := producerSnapshot{asOf: f.durAsOf, state: f.durProd}
		if err := p.writeStateAndProducers(nil, &snap, false); err != nil {
			return fail(err)
		}
	}
	p.collect()
	return nil
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
