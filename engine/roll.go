package engine

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Rolling: the flusher seals the active segment and starts the next one
// when a batch does not fit, the segment is older than the topic's segment
// age, or a purge or seal asks for it.

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
