package engine

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ledgemq/ledge/fence"
)

// Purge and retention raise the start offset; the segment files below it
// are garbage from then on. Each is a small durable state machine:
//
//  1. Intent: one synced metadata batch raises the start offset (purge:
//     with a new history epoch, a purge transition in the lineage, and a
//     producer-state snapshot, the epoch being what invalidates every
//     older bookmark). The start is raised in memory only once the batch
//     is durable, and only then is the operation acknowledged. Its
//     durable state now holds a cleanup obligation (partState.cleaned
//     below the start).
//  2. Cleanup, by the flusher: remove the segment files wholly below the
//     start, fsync the directory, and only then record the obligation as
//     done. A failed directory fsync leaves it pending: nothing is
//     recorded, the failed handle is never fsynced again, and no cleanup
//     of that directory is recorded as done before the next Open (which
//     removes whatever a power loss brought back, fsyncs the directory
//     with a new handle and records it). A failed cleanup does not stop
//     appends: the files it concerns are below the start and never
//     served, and the data appended after the purge is in other files or
//     above the start.
//
// Nothing below the start is served at any point, and the cleanup only
// ever removes files wholly below the durable start, so finishing it never
// touches data appended after the purge.

// Purge removes every record appended so far: the log start offset rises
// to the high watermark and the history epoch is bumped, with a purge
// transition in the lineage, in one synced metadata batch together with a
// snapshot of the producer state (which purge keeps). Offsets continue:
// the next append gets an offset above every purged one. Bookmarks stamped
// with an older epoch resolve to the new start (fence.ResolveBookmark).
//
// Everything appended before the call is first made durable, so the new
// start is the high watermark at that point and the state is entirely
// before or entirely after the purge. Purge returns once the batch is
// durable and the cleanup of the purged segment files was attempted; a
// cleanup that could not complete is finished later (see
// PartitionState.CleanupPending) and does not fail the purge. If the
// metadata batch fails, the purge is not acknowledged and the partition
// fails (ErrPartitionFailed): its in-memory state could otherwise disagree
// with the store, and only a restart tells which of the two states is
// durable.
func (p *Partition) Purge() (PartitionState, error) {
	p.mu.Lock()
	if err := p.appendErrLocked(); err != nil {
		p.mu.Unlock()
		return PartitionState{}, err
	}
	upTo := p.next
	ch := make(chan barrierResult, 1)
	p.barriers = append(p.barriers, barrier{upTo: upTo, ch: ch})
	p.mu.Unlock()
	p.wakeFlusher()
	res := <-ch
	if res.err != nil {
		return PartitionState{}, res.err
	}
	if h := p.e.opts.BeforePurgeCommit; h != nil {
		h(p.t.name, p.index)
	}
	p.mu.Lock()
	epoch := p.epoch + 1
	p.mu.Unlock()
	tr := fence.HistoryTransition{Epoch: epoch, Start: upTo, Kind: fence.TransitionPurge}
	var lineage []fence.HistoryTransition
	err := p.writeStateAndProducers(func(s *partState) {
		s.start = max(s.start, upTo)
		s.epoch = epoch
		s.lineage = append(s.lineage, tr)
		s.ceiling = max(s.ceiling, upTo)
		lineage = slices.Clone(s.lineage)
	}, &res.snap, true)
	p.mu.Lock()
	if err != nil {
		p.failLocked(fmt.Errorf("purge: %w", err), nil)
		p.mu.Unlock()
		return PartitionState{}, p.failed
	}
	p.start = max(p.start, upTo)
	p.epoch, p.lineage = epoch, lineage
	p.tailDropBelowLocked(p.start)
	if n := len(p.segs); n > 0 && p.segs[n-1].size > 0 {
		p.rollWanted = true
	}
	p.notifyLocked()
	p.mu.Unlock()
	p.e.opts.Logger.Info("partition purged", "topic", p.t.name, "partition", p.index, "start", upTo, "epoch", epoch)
	p.awaitCleanup()
	return p.State(), nil
}

// NoRetentionFloor is the floor of EnforceRetention that holds nothing
// back.
const NoRetentionFloor uint64 = math.MaxUint64

// RetentionResult is what one EnforceRetention call did, and what its
// floor held back.
type RetentionResult struct {
	// LogStart is the partition's start offset after the call.
	LogStart uint64
	// Wanted is the start offset retention alone would have set: above
	// LogStart when the floor kept segments that retention would have
	// deleted.
	Wanted uint64
	// HeldSegments and HeldBytes are the sealed segments (and their
	// bytes) that retention would have deleted but the floor kept.
	HeldSegments int
	HeldBytes    int64
	// Sealed reports that the call sealed the active segment by age.
	Sealed bool
}

// HeldBack reports whether the floor kept data that retention would have
// deleted.
func (r RetentionResult) HeldBack() bool { return r.HeldSegments > 0 }

// EnforceRetention deletes sealed segments that retention allows: by age
// (their last append is older than RetentionAge on the jump-free clock
// fed with now) and by size (the oldest while the partition is larger
// than RetentionBytes). It never deletes a segment holding an offset at or
// above floor (NoRetentionFloor: no floor); the result says what the floor
// held back. It raises the start offset to the first remaining record,
// durably, before deleting files; it never bumps the history epoch and
// never deletes the active segment. The file removal is the cleanup Purge
// describes.
//
// An active segment that stopped receiving appends is sealed here once it
// is due: older than SegmentAge since it was created, or (with
// RetentionAge) holding nothing appended within RetentionAge. The call
// waits until it is sealed, fsynced and indexed, so the same call can
// delete it; a partition that failed or is closing is not sealed. A
// sealed segment retention wants whose fsync is deferred (policy none)
// is fsynced first, for the same reason.
func (p *Partition) EnforceRetention(now time.Time, floor uint64) (RetentionResult, error) {
	eff := p.e.clock.observe(now)
	p.e.persistClock(eff)
	p.mu.Lock()
	if p.corrupt != nil {
		p.mu.Unlock()
		return RetentionResult{}, p.corrupt
	}
	p.mu.Unlock()
	// Sealed segments first: on a full disk that frees room before the
	// seal needs any.
	res, unsynced, err := p.retain(eff, floor)
	if err != nil {
		return RetentionResult{}, err
	}
	if unsynced {
		// Retention wants a sealed segment whose fsync is deferred (policy
		// none): it cannot go before it has its index, so it is made
		// durable now rather than when the syncer's delay runs out.
		if err := p.syncNow(); err != nil {
			return RetentionResult{}, err
		}
		if res, _, err = p.retain(eff, floor); err != nil {
			return RetentionResult{}, err
		}
	}
	p.mu.Lock()
	due := p.sealDueLocked(eff)
	p.mu.Unlock()
	if due {
		sealed, err := p.sealActive()
		if err != nil {
			return RetentionResult{}, err
		}
		if sealed {
			if res, _, err = p.retain(eff, floor); err != nil {
				return RetentionResult{}, err
			}
			res.Sealed = true
		}
	}
	if res.HeldBack() {
		p.stats.retentionHeld.Add(1)
	}
	return res, nil
}

// retain deletes the sealed segments retention allows at eff (jump-free
// ms) below floor; see EnforceRetention. It stops at a segment not yet
// fsynced and indexed, and reports whether retention wanted that one.
func (p *Partition) retain(eff int64, floor uint64) (RetentionResult, bool, error) {
	cfg := p.cfg
	var res RetentionResult
	p.mu.Lock()
	var total int64
	for _, s := range p.segs {
		total += s.size
	}
	newStart := p.start
	wanted := p.start
	unsynced := false
	for _, s := range p.segs {
		if !s.sealed {
			break
		}
		byAge := cfg.RetentionAge > 0 && eff-s.effLast > cfg.RetentionAge.Milliseconds()
		bySize := cfg.RetentionBytes > 0 && total-s.size >= cfg.RetentionBytes
		if !byAge && !bySize {
			break
		}
		if !s.indexed {
			unsynced = true
			break
		}
		total -= s.size
		if s.end <= p.start {
			continue // already below the start: the cleanup removes it
		}
		wanted = max(wanted, s.end)
		if s.end > floor || res.HeldSegments > 0 {
			res.HeldSegments++
			res.HeldBytes += s.size
			continue
		}
		newStart = max(newStart, s.end)
	}
	res.LogStart, res.Wanted = p.start, wanted
	p.mu.Unlock()
	if newStart <= res.LogStart {
		return res, unsynced, nil
	}
	if err := p.writeState(func(s *partState) { s.start = max(s.start, newStart) }, true); err != nil {
		return RetentionResult{}, false, err
	}
	p.mu.Lock()
	p.start = max(p.start, newStart)
	res.LogStart = p.start
	p.tailDropBelowLocked(p.start)
	p.notifyLocked()
	p.mu.Unlock()
	p.e.opts.Logger.Info("retention raised the start offset", "topic", p.t.name, "partition", p.index, "start", newStart)
	p.awaitCleanup()
	return res, unsynced, nil
}

// sealDueLocked reports whether the active segment holds data and is due
// to be sealed by age at eff (jump-free ms): older than SegmentAge, or
// holding nothing appended within RetentionAge.
func (p *Partition) sealDueLocked(eff int64) bool {
	n := len(p.segs)
	if n == 0 || p.segs[n-1].size == 0 {
		return false
	}
	s := p.segs[n-1]
	if eff-s.effCreated >= p.cfg.SegmentAge.Milliseconds() {
		return true
	}
	return p.cfg.RetentionAge > 0 && eff-s.effLast > p.cfg.RetentionAge.Milliseconds()
}

// sealActive asks the flusher to seal the active segment (after what is
// queued) and waits until the sealed segment is fsynced and indexed. It
// reports false, without an error, when the partition takes no appends
// (failed, closing): nothing is sealed then.
func (p *Partition) sealActive() (bool, error) {
	p.mu.Lock()
	if p.appendErrLocked() != nil {
		p.mu.Unlock()
		return false, nil
	}
	var act *segment
	if n := len(p.segs); n > 0 {
		act = p.segs[n-1]
	}
	ch := make(chan barrierResult, 1)
	p.barriers = append(p.barriers, barrier{upTo: p.next, ch: ch})
	p.rollWanted = true
	p.mu.Unlock()
	p.wakeFlusher()
	res := <-ch
	if res.err != nil {
		return false, res.err
	}
	// A disk too full for the seal leaves the segment active (the roll
	// stays wanted): nothing was sealed.
	p.mu.Lock()
	defer p.mu.Unlock()
	return act == nil || act.sealed, nil
}

// awaitCleanup asks the flusher for a cleanup and waits until it was
// attempted (or the flusher stopped).
func (p *Partition) awaitCleanup() {
	done := make(chan struct{})
	p.mu.Lock()
	p.cleanups = append(p.cleanups, done)
	p.mu.Unlock()
	p.wakeFlusher()
	select {
	case <-done:
	case <-p.flusherDone:
	}
}

// wantCleanup asks the flusher for a cleanup without waiting: a segment
// that may lie below the start was just sealed.
func (p *Partition) wantCleanup() {
	p.mu.Lock()
	p.cleanupWanted = true
	p.mu.Unlock()
	p.wakeFlusher()
}

// cleanup removes the sealed segments that lie wholly below the start
// offset, fsyncs the directory, and then records the cleanup obligation as
// done (see the comment at the top of this file). Run by the flusher.
// Read plans holding a removed segment keep reading it: its file is closed
// when the last one is released. With waited set, segments sealed but not
// yet fsynced are fsynced first, so that they can go too; a failure of
// that fsync fails the partition and is returned.
func (p *Partition) cleanup(waited bool) error {
	if waited && p.unsealedBelowStart() {
		if err := p.syncNow(); err != nil {
			return err
		}
	}
	p.stateMu.Lock()
	pending := p.durable.cleanupPending()
	p.stateMu.Unlock()
	p.mu.Lock()
	start := p.start
	var gone []*segment
	complete := true
	keep := p.segs[:0]
	for i, s := range p.segs {
		below := s.size > 0 && s.end <= start
		if below && s.sealed && s.indexed && i+1 < len(p.segs) {
			s.deleted = true
			gone = append(gone, s)
			continue
		}
		if below {
			complete = false // not sealed yet: a later cleanup removes it
		}
		keep = append(keep, s)
	}
	clear(p.segs[len(keep):])
	p.segs = keep
	p.mu.Unlock()
	if len(gone) == 0 && !pending {
		return nil
	}
	fs := p.e.fs
	for _, s := range gone {
		for _, path := range []string{s.path, indexPath(s.path)} {
			if err := fs.Remove(path); err != nil && !isNotExist(err) {
				complete = false
				p.e.opts.Logger.Warn("segment file not removed; the next start removes it", "file", path, "err", err)
			}
		}
		s.release()
	}
	if len(gone) > 0 {
		p.e.probeSpace(true) // the removal may have made room for appends
	}
	f := &p.fl
	if f.dirSyncFailed {
		return nil
	}
	if err := syncDir(fs, p.dir); err != nil {
		f.dirSyncFailed = true
		p.e.opts.Logger.Error("directory fsync after removing segments failed; the removal is finished at the next start",
			"topic", p.t.name, "partition", p.index, "dir", p.dir, "err", err)
		return nil
	}
	if !complete || !pending {
		return nil
	}
	if err := p.writeState(func(s *partState) { s.cleaned = max(s.cleaned, start) }, false); err != nil {
		p.e.opts.Logger.Warn("cleanup done but not recorded; the next start checks again", "topic", p.t.name, "partition", p.index, "err", err)
	}
	return nil
}

// unsealedBelowStart reports whether a sealed segment wholly below the
// start offset still waits for its fsync and index.
func (p *Partition) unsealedBelowStart() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.segs {
		if s.sealed && !s.indexed && s.size > 0 && s.end <= p.start {
			return true
		}
	}
	return false
}
