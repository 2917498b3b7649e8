package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/ledgemq/ledge/fence"
)

// Purge removes every record appended so far: the log start offset rises
// to the high watermark and the history epoch is bumped, with a purge
// transition in the lineage, in one synced metadata batch together with a
// snapshot of the producer state (which purge keeps). Offsets continue:
// the next append gets an offset above every purged one. Bookmarks stamped
// with an older epoch resolve to the new start (fence.ResolveBookmark).
//
// Everything appended before the call is first made durable, so the new
// start is the high watermark at that point and the state is entirely
// before or entirely after the purge. Segment files are deleted after the
// batch is durable; files that come back after a power loss lie below the
// start offset and are removed again at the next Open. If the metadata
// batch fails, the partition fails (ErrPartitionFailed): its in-memory
// state could otherwise disagree with the store.
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
	select {
	case p.wake <- struct{}{}:
	default:
	}
	res := <-ch
	if res.err != nil {
		return PartitionState{}, res.err
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
	select {
	case p.wake <- struct{}{}:
	default:
	}
	p.collect()
	return p.State(), nil
}

// EnforceRetention deletes sealed segments that retention allows: by age
// (their last append is older than RetentionAge on the jump-free clock
// fed with now) and by size (the oldest while the partition is larger
// than RetentionBytes). It raises the start offset to the first remaining
// record, durably, before deleting files; it never bumps the history epoch
// and never deletes the active segment.
func (p *Partition) EnforceRetention(now time.Time) error {
	eff := p.e.clock.observe(now)
	p.e.persistClock(eff)
	cfg := p.cfg
	if cfg.RetentionAge <= 0 && cfg.RetentionBytes <= 0 {
		return nil
	}
	p.mu.Lock()
	if p.corrupt != nil {
		p.mu.Unlock()
		return p.corrupt
	}
	var total int64
	for _, s := range p.segs {
		total += s.size
	}
	newStart := p.start
	for _, s := range p.segs {
		if !s.sealed || !s.indexed {
			break
		}
		byAge := cfg.RetentionAge > 0 && eff-s.effLast > cfg.RetentionAge.Milliseconds()
		bySize := cfg.RetentionBytes > 0 && total-s.size >= cfg.RetentionBytes
		if !byAge && !bySize {
			break
		}
		total -= s.size
		newStart = max(newStart, s.end)
	}
	p.mu.Unlock()
	if newStart <= p.startOffset() {
		return nil
	}
	if err := p.writeState(func(s *partState) { s.start = max(s.start, newStart) }, true); err != nil {
		return err
	}
	p.mu.Lock()
	p.start = max(p.start, newStart)
	p.tailDropBelowLocked(p.start)
	p.notifyLocked()
	p.mu.Unlock()
	p.e.opts.Logger.Info("retention raised the start offset", "topic", p.t.name, "partition", p.index, "start", newStart)
	p.collect()
	return nil
}

// collect deletes sealed segments that lie wholly below the start offset,
// then fsyncs the directory. Read plans holding a segment keep reading it:
// the file is closed when the last one is released.
func (p *Partition) collect() {
	p.mu.Lock()
	var gone []*segment
	keep := p.segs[:0]
	for i, s := range p.segs {
		if s.sealed && s.indexed && i+1 < len(p.segs) && s.end <= p.start {
			s.deleted = true
			gone = append(gone, s)
			continue
		}
		keep = append(keep, s)
	}
	clear(p.segs[len(keep):])
	p.segs = keep
	p.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	fs := p.e.fs
	for _, s := range gone {
		if err := fs.Remove(s.path); err != nil && !isNotExist(err) {
			p.e.opts.Logger.Warn("segment not removed; the next start removes it", "file", s.path, "err", err)
		}
		_ = fs.Remove(indexPath(s.path))
		s.release()
	}
	if err := syncDir(fs, p.dir); err != nil {
		p.e.opts.Logger.Warn("directory sync after removing segments failed; removed segments may come back and are removed at the next start", "dir", p.dir, "err", err)
	}
}
