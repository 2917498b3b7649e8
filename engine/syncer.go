package engine

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/fence"
)

// Making written data durable. syncOnce fsyncs every segment with data
// written since the last sync, oldest first (sealed ones through their
// read handle: the flusher no longer writes them; the active one through
// the handle given, or its read handle — fdatasync covers the file, not the
// descriptor), writes the index files of newly sealed segments, fsyncs the
// directory when entries changed, and only then advances the durable end,
// the checkpoint and the durable producer state. What it makes durable, and
// so acknowledges, is what was written before it took its work: a write
// made while it runs waits for the next one. Under DurabilityAlways the
// flusher calls it after each round of writes, or, after a round of
// overlapSyncBytes or more, hands it to the syncer goroutine and writes the
// next round meanwhile; under interval and none the syncer goroutine calls
// it, on its timer, when a segment is sealed (under none, deferred: below),
// and on request (purge, close), so a write never waits for an fsync.
//
// A failed fsync is never retried: the partition fails, and what was not
// durable is not acknowledged (always) or is lost at a crash (the recovery
// bumps the history epoch).
type durability struct {
	mu      sync.Mutex // serializes syncOnce
	prod    map[fence.ProducerID]*fence.ProducerState
	asOf    uint64
	kick    chan struct{} // a segment was sealed
	reqs    chan chan error
	stop    chan struct{}
	stopped chan struct{}
}

// noteUnsyncedLocked records that seg has data not yet fsynced.
func (p *Partition) noteUnsyncedLocked(seg *segment) {
	if n := len(p.unsyncedSegs); n == 0 || p.unsyncedSegs[n-1] != seg {
		if !slices.Contains(p.unsyncedSegs, seg) {
			seg.acquire() // kept open until synced
			p.unsyncedSegs = append(p.unsyncedSegs, seg)
		}
	}
}

// syncOnce makes everything written so far durable. active, if not nil,
// is the flusher's handle of the active segment (used when the caller is
// the flusher).
func (p *Partition) syncOnce(active vfs.File) error {
	d := &p.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	w, err := p.takeUnsynced()
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range w.segs {
			s.release()
		}
	}()
	fail := func(err error) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.failLocked(err, nil)
		return p.failed
	}
	if err := p.fsyncSegments(w.segs, w.act, active); err != nil {
		return fail(err)
	}
	sealed, err := p.indexSealed(w.segs)
	if err != nil {
		return fail(err)
	}
	if w.dirDirty || sealed {
		if err := syncDir(p.e.fs, p.dir); err != nil {
			return fail(err)
		}
	}
	for _, r := range w.recs {
		applyProducer(d.prod, r)
	}
	d.asOf = max(d.asOf, w.target)
	p.mu.Lock()
	p.syncedEnd = max(p.syncedEnd, w.target)
	if w.act != nil {
		// The end of the data, not target: after an unclean recovery
		// numbering resumes above a gap that holds no record.
		p.checkpoint = checkpoint{seg: w.act.base, pos: w.actSize, end: w.actEnd}
	}
	if p.cfg.Durability == DurabilityAlways {
		p.notifyLocked()
	}
	p.mu.Unlock()
	if sealed {
		// Everything before the active segment is durable: checkpoint it
		// with the producer state, so recovery need not read sealed
		// segments.
		snap := producerSnapshot{asOf: d.asOf, state: d.prod}
		if err := p.writeStateAndProducers(nil, &snap, false); err != nil {
			return fail(err)
		}
		if p.cleanupDue() {
			p.wantCleanup()
		}
	}
	return nil
}

// syncWork is what one syncOnce makes durable: everything written up to
// target, in segs (each holding a reference), with the producer records
// recs, and the directory if its entries changed. act is the active
// segment, with its size and end as they were then: the checkpoint.
type syncWork struct {
	target   uint64
	segs     []*segment
	recs     []prodRec
	dirDirty bool
	act      *segment
	actSize  int64
	actEnd   uint64
}

// takeUnsynced takes what was written and not yet fsynced, or returns the
// partition's failure: a failed partition is never fsynced again.
func (p *Partition) takeUnsynced() (syncWork, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return syncWork{}, p.failed
	}
	w := syncWork{target: p.writtenEnd, segs: p.unsyncedSegs, recs: p.unsyncedProd, dirDirty: p.dirDirty}
	p.unsyncedSegs, p.unsyncedProd, p.dirDirty = nil, nil, false
	if n := len(p.segs); n > 0 {
		w.act = p.segs[n-1]
		w.actSize, w.actEnd = w.act.size, w.act.end
	}
	return w, nil
}

// fsyncSegments fdatasyncs segs, the active one act through active (the
// flusher's write handle) when given.
func (p *Partition) fsyncSegments(segs []*segment, act *segment, active vfs.File) error {
	for _, s := range segs {
		h := s.rf
		if s == act && active != nil {
			h = active
		}
		t0 := time.Now()
		err := h.SyncData()
		p.stats.syncs.Add(1)
		p.stats.syncNanos.Add(uint64(time.Since(t0)))
		if err != nil {
			p.stats.syncFailures.Add(1)
			return fmt.Errorf("fsync %s: %w", s.path, err)
		}
	}
	return nil
}

// indexSealed writes the index file of each sealed segment of segs that
// has none, now that the segment is durable; sealed reports whether it
// wrote one (the directory then needs an fsync).
func (p *Partition) indexSealed(segs []*segment) (sealed bool, err error) {
	for _, s := range segs {
		p.mu.Lock()
		done := !s.sealed || s.indexed
		var idx []byte
		if !done {
			idx = s.encodeIndex()
		}
		p.mu.Unlock()
		if done {
			continue
		}
		if err := writeIndexFile(p.e.fs, s, idx); err != nil {
			return sealed, fmt.Errorf("write the index of %s: %w", s.path, err)
		}
		p.mu.Lock()
		s.indexed = true
		p.mu.Unlock()
		sealed = true
	}
	return sealed, nil
}

// cleanupDue reports whether a cleanup may have something to do: a
// segment lies below the start offset (left by a purge or by retention),
// or a cleanup obligation is still open. Without either, a seal asks the
// flusher for nothing.
func (p *Partition) cleanupDue() bool {
	if p.cleanupPending.Load() {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.segs {
		if s.size > 0 && s.end <= p.start {
			return true
		}
	}
	return false
}

// durableProducers returns a copy of the durable producer state.
func (p *Partition) durableProducers() producerSnapshot {
	d := &p.dur
	d.mu.Lock()
	defer d.mu.Unlock()
	return producerSnapshot{asOf: d.asOf, state: cloneProducers(d.prod)}
}

// syncNow makes everything written so far durable, through the syncer if
// the policy has one.
func (p *Partition) syncNow() error {
	if p.cfg.Durability == DurabilityAlways || p.dur.reqs == nil {
		return p.syncOnce(p.fl.wf)
	}
	ch := make(chan error, 1)
	select {
	case p.dur.reqs <- ch:
		return <-ch
	case <-p.dur.stopped:
		return p.syncOnce(nil)
	}
}

// kickSyncer tells the syncer a segment was sealed (interval, none) or
// that a round awaits its fsync (always).
func (p *Partition) kickSyncer() {
	if p.dur.kick == nil {
		return
	}
	select {
	case p.dur.kick <- struct{}{}:
	default: // a sync is already due
	}
}

func (p *Partition) startSyncer() {
	d := &p.dur
	d.kick = make(chan struct{}, 1)
	d.reqs = make(chan chan error)
	d.stop = make(chan struct{})
	d.stopped = make(chan struct{})
	go p.runSyncer()
}

func (p *Partition) stopSyncer() {
	d := &p.dur
	if d.stop == nil {
		return
	}
	close(d.stop)
	<-d.stopped
}

// Under DurabilityNone the syncer defers the fsync of a sealed segment:
// it syncs once the oldest sealed segment waiting for one was sealed
// noneSealSyncDelay ago, or as soon as noneSealSyncMaxSegments wait. The
// policy acknowledges from the page cache, and the kernel writes dirty
// pages back on its own schedule (Linux's default expiry is the same 30
// s), so the deferral moves no more of the log into the page cache's care
// than the kernel already holds there; what it changes is that a burst of
// appends is taken at the speed of memory instead of paying for a 64 MiB
// writeback at every seal (measured: a 16 s burst of 1 KiB records ran at
// about 420k records/s until the kernel's own writeback began, and at
// 220-270k records/s with an fsync at every seal). Until its fsync a
// sealed segment has no index file: a recovery after a crash rebuilds the
// index from the segment's checksummed batches, as it always could. Nor
// can retention delete it: EnforceRetention, when it wants such a
// segment, has the syncer make it durable at once (so a burst past
// RetentionBytes is cut back by the next pass, not 30 s later), and a
// purge's cleanup syncs first as it always did.
const (
	noneSealSyncDelay       = 30 * time.Second
	noneSealSyncMaxSegments = 32
)

// sealedAwaitingSync counts the sealed segments with data not yet fsynced.
func (p *Partition) sealedAwaitingSync() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.unsyncedSegs {
		if s.sealed {
			n++
		}
	}
	return n
}

// runSyncer fsyncs in the background: on request, when a segment is
// sealed (under none, deferred as above), under interval every
// SyncInterval while data is unsynced, and under always when the flusher
// hands it a big round's fsync (at once).
func (p *Partition) runSyncer() {
	d := &p.dur
	defer close(d.stopped)
	var tick <-chan time.Time
	if p.cfg.Durability == DurabilityInterval {
		t := time.NewTicker(p.cfg.SyncInterval)
		defer t.Stop()
		tick = t.C
	}
	// sealDue fires when a deferred seal's fsync is due (nil: none is).
	var sealTimer *time.Timer
	var sealDue <-chan time.Time
	synced := func() {
		if sealTimer != nil {
			sealTimer.Stop()
			sealTimer, sealDue = nil, nil
		}
	}
	defer synced()
	for {
		select {
		case <-d.stop:
			return
		case ch := <-d.reqs:
			synced()
			ch <- p.syncOnce(nil)
		case <-d.kick:
			if p.cfg.Durability == DurabilityNone && p.sealedAwaitingSync() < noneSealSyncMaxSegments {
				if sealDue == nil {
					sealTimer = time.NewTimer(noneSealSyncDelay)
					sealDue = sealTimer.C
				}
				continue
			}
			synced()
			_ = p.syncOnce(nil)
		case <-sealDue:
			sealTimer, sealDue = nil, nil
			_ = p.syncOnce(nil)
		case <-tick:
			p.mu.Lock()
			pending := len(p.unsyncedSegs) > 0 || p.dirDirty
			p.mu.Unlock()
			if pending {
				_ = p.syncOnce(nil)
			}
		}
	}
}
