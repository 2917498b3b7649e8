package engine

import (
	"errors"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// startFlusher starts the partition's durability pipeline, unless the
// partition is not served (corrupt log).
func (p *Partition) startFlusher() {
	p.flusherDone = make(chan struct{})
	if p.corrupt != nil {
		close(p.flusherDone)
		return
	}
	if p.dur.prod == nil {
		p.dur.prod = cloneProducers(p.producers)
	}
	if n := len(p.segs); n > 0 {
		a := p.segs[n-1]
		wf, err := p.e.fs.OpenReadWrite(a.path, vfs.WriteCategoryUnspecified)
		if err != nil {
			p.mu.Lock()
			p.failLocked(err, nil)
			p.mu.Unlock()
		} else {
			p.fl.wf, p.fl.physEnd = wf, a.size
		}
	}
	p.startSyncer()
	go p.runFlusher()
}

// stop makes the partition refuse new work with reason and waits for its
// flusher to finish: with ErrClosed the flusher writes and fsyncs what was
// queued; with any other reason (a deleted topic) queued work fails.
func (p *Partition) stop(reason error) {
	p.mu.Lock()
	if p.closing == nil {
		p.closing = reason
		p.notifyLocked()
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	if p.flusherDone != nil {
		<-p.flusherDone
	}
	p.mu.Lock()
	p.tailDropLocked()
	p.tail.ahead = nil
	unsynced := p.unsyncedSegs
	p.unsyncedSegs = nil
	p.mu.Unlock()
	for _, s := range unsynced {
		s.release()
	}
	p.closeSegments()
}

// closeSegments drops the partition's references on its segments; read
// plans still holding one keep their file open until they are released.
func (p *Partition) closeSegments() {
	p.mu.Lock()
	segs := p.segs
	p.mu.Unlock()
	for _, s := range segs {
		s.release()
	}
}

// closeClean stops the partition and, if it did not fail, records a clean
// shutdown: the checkpoint at the end of the log, the next offset as the
// ceiling, and the producer state.
func (p *Partition) closeClean() error {
	p.stop(ErrClosed)
	p.mu.Lock()
	failed := p.failed != nil || p.corrupt != nil
	next := p.next
	var cp checkpoint
	if n := len(p.segs); n > 0 {
		a := p.segs[n-1]
		cp = checkpoint{seg: a.base, pos: a.size, end: a.end}
	}
	p.mu.Unlock()
	if failed {
		return nil
	}
	snap := p.durableProducers()
	err := p.writeStateAndProducers(func(s *partState) {
		s.ceiling, s.clean = next, true
		if cp.seg >= s.cp.seg {
			s.cp = cp
		}
	}, &snap, false)
	if err != nil && !errors.Is(err, ErrMetadataFailed) {
		return err
	}
	return err
}
