package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
)

// Recovery of one partition, at Open.
//
//  1. Load the durable state (start, epoch, lineage, reservation ceiling,
//     checkpoint, clean flag) and the producer-state snapshot.
//  2. Remove segments that lie wholly below the start offset (a purge or
//     retention whose directory sync did not survive brings them back) and
//     temporary files, and fsync the directory if a cleanup obligation is
//     pending, even when nothing is left to remove (the removal may have
//     been made by the previous run and never made durable). If the
//     previous run's log failed, everything after its last durable
//     checkpoint is a torn tail whatever it looks like: later segments are
//     removed and the checkpoint's segment is cut at the checkpoint. A
//     first segment that begins above the start is renamed to begin at
//     it; unless it was created in an empty log, its predecessors were
//     lost (see rebaseFirstSegment).
//  3. Sealed segments: load their index, or rebuild it by scanning. They
//     were fsynced before their successor was created, so any damage in
//     them (other than zeros past their end) is corruption.
//  4. The active segment: scan from the end its index covers, by
//     checksums. Damage before the checkpoint is corruption: the partition
//     is refused with a *CorruptLogError naming file and position. Damage
//     after it is a torn tail: the log ends before it, the rest of the file
//     is zeroed and the file fsynced (vfs has no Truncate). What is kept
//     after the checkpoint is written again first: it was read from the
//     page cache, which may hold bytes the disk lost with a failed fsync.
//     A sealed segment whose records end where its successor begins is
//     complete: zeros (or garbage) after them are padding, not a torn
//     tail, and the later segments stay.
//     Batches below the start offset are part of the log's structure (a
//     purge that raced an append leaves a segment holding both sides of
//     the start) but are never served; a last segment wholly below the
//     start is removed.
//  5. Numbering. Under always, readers saw only fsynced records, which
//     step 4 kept: numbering continues at the log's end (or where the
//     previous recovery resumed it, a high watermark readers saw), after
//     any stop, and nothing is skipped. Otherwise, after a clean shutdown
//     the next offset is the recorded one; after an unclean stop offsets
//     up to the reservation ceiling may have been handed out and seen, so
//     numbering continues at the ceiling and, as records a reader may
//     have seen were possibly lost, the history epoch is bumped with a
//     lossy-recovery transition recording the end that was kept (the
//     start, if the first segments were lost). The range skipped is added
//     to the partition's gaps. The ceiling is then lowered to the next
//     offset, which is recorded as where numbering resumed, so a
//     partition that takes no append before the next crash recovers
//     without a bump (the gap below it was never handed out).
func (p *Partition) recover() error {
	st, err := p.loadState()
	if err != nil {
		return err
	}
	p.durable = st
	snap, err := p.loadProducers()
	if err != nil {
		return err
	}
	bases, frontLost, err := p.tidyFiles(&st)
	if err != nil {
		return err
	}
	end, err := p.openLog(bases, st, snap)
	if err != nil || p.corrupt != nil {
		return err
	}
	return p.resume(st, snap, end, frontLost)
}

// tidyFiles is step 2: it lists the segments, removing what lies wholly
// below the start and, after a failed log, what followed its last
// durable checkpoint, and rebases the first segment at the start. It
// returns the segments' bases and whether the segments before the first
// one were lost.
func (p *Partition) tidyFiles(st *partState) ([]uint64, bool, error) {
	bases, err := p.listSegments(st.start, st.cleanupPending())
	if err != nil {
		return nil, false, err
	}
	if st.cutAfterCheckpoint {
		// Nothing after the checkpoint's segment was durable.
		i := len(bases)
		for i > 0 && bases[i-1] > st.cp.seg {
			i--
		}
		if i < len(bases) {
			if err := p.removeSegments(bases[i:]); err != nil {
				return nil, false, err
			}
			bases = bases[:i]
		}
	}
	frontLost, err := p.rebaseFirstSegment(bases, st)
	if err != nil {
		return nil, false, err
	}
	return bases, frontLost, nil
}

// openLog is steps 3 and 4: it opens the segments at bases in order,
// applying the producer state their headers hold past the snapshot,
// cuts the torn tail and removes what followed it, makes what it kept
// durable, and returns the end of the log (never below the start). A
// corrupt log is refused (p.corrupt is set) with a nil error.
func (p *Partition) openLog(bases []uint64, st partState, snap producerSnapshot) (uint64, error) {
	applyHeader := func(h record.BatchHeader) {
		if h.BaseOffset >= snap.asOf {
			if r, ok := prodRecOf(h); ok {
				applyProducer(snap.state, r)
			}
		}
	}
	end := st.start    // end of the log: never below the start
	var prevEnd uint64 // end of the previous segment
	p.maxTS = minTS
	for i, base := range bases {
		limit := int64(-1)
		if st.cutAfterCheckpoint && base == st.cp.seg {
			limit = st.cp.pos
		}
		seg, cut, err := p.openSegment(base, max(prevEnd, base), limit, st, snap.asOf, applyHeader)
		if err != nil {
			var ce *CorruptLogError
			if errors.As(err, &ce) {
				p.refuse(ce)
				return 0, nil
			}
			return 0, err
		}
		p.segs = append(p.segs, seg)
		end = max(end, seg.end)
		prevEnd = seg.end
		p.maxTS = max(p.maxTS, seg.maxTS)
		if !cut && i+1 < len(bases) && bases[i+1] != seg.end {
			// Each segment starts where the one before ended: this one
			// lost its tail.
			reason := fmt.Sprintf("the segment ends at offset %d, its successor starts at %d", seg.end, bases[i+1])
			if base < st.cp.seg && seg.end < st.cp.end && st.cp.end > st.start {
				p.refuse(&CorruptLogError{File: seg.path, Pos: seg.size, Reason: reason})
				return 0, nil
			}
			fi, err := seg.rf.Stat()
			if err != nil {
				return 0, err
			}
			if err := p.cutTail(seg, fi.Size()); err != nil {
				return 0, err
			}
			seg.rescanned, cut = true, true
		}
		if cut && i+1 < len(bases) && seg.end != bases[i+1] {
			// The torn tail began in this segment: the later ones are part
			// of it. (A segment whose records end where its successor
			// begins is complete; what followed them in the file was
			// padding, zeroed now.)
			if err := p.removeSegments(bases[i+1:]); err != nil {
				return 0, err
			}
			break
		}
	}
	if n := len(p.segs); n > 0 && p.segs[n-1].size > 0 && p.segs[n-1].end <= st.start {
		// The last segment lies wholly below the start (the segment after
		// it was lost): it holds nothing to serve, and a new one is
		// started at the next append.
		last := p.segs[n-1]
		p.segs = p.segs[:n-1]
		last.release()
		if err := p.removeSegments([]uint64{last.base}); err != nil {
			return 0, err
		}
	}
	if err := p.sealRecovered(); err != nil {
		return 0, err
	}
	// Durable data that is gone is corruption too.
	if st.cp.end > end && st.cp.end > st.start {
		name := p.segmentPath(st.cp.seg, segmentExt)
		p.refuse(&CorruptLogError{File: name, Pos: st.cp.pos, Reason: fmt.Sprintf("the log ends at offset %d, below its durable end %d", end, st.cp.end)})
		return 0, nil
	}
	return end, nil
}

// refuse marks the partition corrupt: it is not served.
func (p *Partition) refuse(ce *CorruptLogError) {
	p.corrupt = ce
	p.e.opts.Logger.Error("corrupt log; partition not served", "topic", p.t.name, "partition", p.index, "err", ce)
	p.closeSegments()
	p.segs = nil
}

// resume is step 5: it decides where numbering resumes after a log that
// ends at end, bumping the history epoch if records a reader may have
// seen were lost, and records the recovered state durably.
func (p *Partition) resume(st partState, snap producerSnapshot, end uint64, frontLost bool) error {
	// What was kept ends where the log ends, unless the segments before
	// the first one were lost: then nothing at or above the start
	// survived below the first one's records.
	keptEnd := end
	if frontLost {
		keptEnd = st.start
	}
	next := end
	bumped := frontLost && p.cfg.Durability != DurabilityAlways
	switch {
	case p.cfg.Durability == DurabilityAlways:
		// Readers saw only fsynced records, and the log keeps every one
		// of them: the offsets handed out past its end (appends not yet
		// fsynced, or refused for a full disk) were neither acknowledged
		// nor seen, so numbering continues at the end, after a clean stop
		// or not. The high watermark a previous recovery published
		// (resumed) was seen.
		next = max(end, st.resumed)
	case st.clean:
		next = max(end, st.ceiling)
	case st.ceiling > max(end, st.resumed):
		// Offsets in [max(end, resumed), ceiling) may have been handed
		// out and lost (below resumed, a previous recovery's gap: none
		// was).
		next = st.ceiling
		bumped = true
	case st.ceiling > end:
		next = st.ceiling
	}
	next = max(next, st.start)
	gaps := withGap(st.gaps, max(end, st.start), next, st.start)
	if next > max(end, st.start) {
		p.e.opts.Logger.Warn("recovery skipped offsets: numbering resumes above the log's end", "topic", p.t.name, "partition", p.index,
			"end", max(end, st.start), "next", next, "skipped", next-max(end, st.start))
	}
	if bumped {
		st.epoch++
		st.lineage = append(slices.Clone(st.lineage), fence.HistoryTransition{
			Epoch: st.epoch, Start: next, Kind: fence.TransitionLossyRecovery, KeptEnd: keptEnd})
		p.e.opts.Logger.Warn("lossy recovery: history epoch bumped", "topic", p.t.name, "partition", p.index,
			"kept_end", keptEnd, "next", next, "epoch", st.epoch)
	}
	p.start, p.epoch, p.lineage, p.gaps = st.start, st.epoch, st.lineage, gaps
	p.next, p.writtenEnd, p.syncedEnd, p.ceiling = next, next, next, next
	p.producers = snap.state
	p.dur.prod = cloneProducers(snap.state)
	p.dur.asOf = end
	var cp checkpoint
	if n := len(p.segs); n > 0 {
		a := p.segs[n-1]
		cp = checkpoint{seg: a.base, pos: a.size, end: end}
		p.checkpoint = cp
	}
	// Every segment file wholly below the start is gone, durably: the
	// cleanup obligation is done.
	return p.writeState(func(s *partState) {
		s.epoch, s.lineage, s.ceiling, s.clean = st.epoch, st.lineage, next, false
		s.cleaned, s.cutAfterCheckpoint, s.resumed, s.gaps = st.start, false, next, gaps
		if len(p.segs) > 0 {
			s.cp = cp
		}
	}, false)
}

const minTS = -1 << 63

func (p *Partition) loadState() (partState, error) {
	key := partKey('P', p.t.id, p.index)
	v, closer, err := p.e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return partState{}, errNoState
	}
	if err != nil {
		return partState{}, err
	}
	defer closer.Close()
	pl, version, err := openVersioned(key, v, kindPartition, partStateVersion)
	if err != nil {
		return partState{}, err
	}
	st, err := decodePartState(pl, version)
	if err != nil {
		return st, fmt.Errorf("engine: partition state %x: %w", key, err)
	}
	return st, nil
}

func (p *Partition) loadProducers() (producerSnapshot, error) {
	key := partKey('R', p.t.id, p.index)
	v, closer, err := p.e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return producerSnapshot{state: make(map[fence.ProducerID]*fence.ProducerState)}, nil
	}
	if err != nil {
		return producerSnapshot{}, err
	}
	defer closer.Close()
	pl, err := openValue(key, v, kindProducers)
	if err != nil {
		return producerSnapshot{}, err
	}
	s, err := decodeProducerSnapshot(pl)
	if err != nil {
		return s, fmt.Errorf("engine: producer snapshot %x: %w", key, err)
	}
	return s, nil
}

// openSegment opens a segment and loads or rebuilds its index. A segment
// before the checkpoint's is durable: damage in it (other than zeros past
// its end) is corruption. From the checkpoint's segment on, damage after
// the checkpoint is a torn tail: the log ends there (cut reports it), and
// the rest of the file is zeroed. minOffset is the end of the previous
// segment. limit, if not negative, is where the log must end in this file
// (the exact durable end of a log whose fsync failed): the rest is cut.
func (p *Partition) openSegment(base, minOffset uint64, limit int64, st partState, snapAsOf uint64, applyHeader func(record.BatchHeader)) (*segment, bool, error) {
	path := p.segmentPath(base, segmentExt)
	rf, err := p.e.fs.Open(path)
	if err != nil {
		return nil, false, err
	}
	seg, cut, err := p.recoverSegment(newSegment(base, path, rf), minOffset, limit, st, snapAsOf, applyHeader)
	if err != nil {
		_ = rf.Close()
		return nil, false, err
	}
	return seg, cut, nil
}

// recoverSegment is openSegment's work on the opened segment seg.
func (p *Partition) recoverSegment(seg *segment, minOffset uint64, limit int64, st partState, snapAsOf uint64, applyHeader func(record.BatchHeader)) (*segment, bool, error) {
	fi, err := seg.rf.Stat()
	if err != nil {
		return nil, false, err
	}
	fileSize := fi.Size()
	logical := fileSize // the part of the file that may hold the log
	if limit >= 0 && limit < fileSize {
		logical = limit
	}
	seg.effCreated, seg.effLast = p.e.clock.now(), p.e.clock.now()
	seg.maxTS = p.maxTS

	scanFrom, err := p.loadRecoveredIndex(seg, logical)
	if err != nil {
		return nil, false, err
	}
	if scanFrom > 0 && snapAsOf < seg.end {
		// Producer state newer than the snapshot is in these headers.
		if _, err := scanSegment(seg.rf, seg.posFor(snapAsOf), scanFrom, 0, func(_ int64, h record.BatchHeader, _ []byte) { applyHeader(h) }); err != nil {
			return nil, false, err
		}
	}
	durable := seg.base < st.cp.seg
	// A sealed segment's index describes it whole, unless the index was
	// written while the segment was active (at a clean close) and could
	// not be written again when it was sealed (a full disk): the rest is
	// scanned then.
	if durable && scanFrom > 0 && scanFrom == fileSize {
		seg.sealed, seg.indexed = true, true
		return seg, false, nil
	}
	durableLimit := scanFrom
	switch {
	case durable:
		durableLimit = fileSize
	case seg.base == st.cp.seg:
		durableLimit = max(durableLimit, st.cp.pos)
	}
	partMax := seg.maxTS
	interval := int64(p.e.opts.IndexIntervalBytes)
	res, err := scanSegment(seg.rf, scanFrom, logical, max(minOffset, seg.end), func(pos int64, h record.BatchHeader, _ []byte) {
		seg.addBatch(pos, h.BaseOffset, h.LastOffset(), h.MaxTimestamp, &partMax, interval)
		applyHeader(h)
	})
	if err != nil {
		return nil, false, err
	}
	seg.size = res.end
	seg.rescanned = true
	// What lies past the durable checkpoint (and past what an index
	// covers) was read from the page cache, which after a failed fsync may
	// hold bytes the disk does not: a later fsync would not write them, as
	// their pages are clean. Writing them again makes sealRecovered's
	// fsync make them durable. (A clean shutdown leaves nothing here.)
	if !durable {
		from := scanFrom
		if seg.base == st.cp.seg {
			from = max(scanFrom, st.cp.pos)
		}
		if err := rewrite(p.e.fs, seg.rf, seg.path, from, seg.size); err != nil {
			return nil, false, err
		}
	}
	if (res.badPos < 0 && logical == fileSize) || (durable && res.zeros) {
		return seg, false, nil
	}
	if res.badPos >= 0 && res.badPos < durableLimit && res.lastEnd < st.cp.end && st.cp.end > st.start {
		return nil, false, &CorruptLogError{File: seg.path, Pos: res.badPos, Reason: res.reason}
	}
	if err := p.cutTail(seg, fileSize); err != nil {
		return nil, false, err
	}
	return seg, true, nil
}

// loadRecoveredIndex loads seg's index file, if it has a usable one, and
// returns the end of the prefix of seg it describes (0 without one). An
// index is written after its segment was fsynced: that prefix is
// durable. An index that describes more than the first logical bytes of
// the file is removed: a later index would be trusted for bytes that are
// about to change.
func (p *Partition) loadRecoveredIndex(seg *segment, logical int64) (int64, error) {
	data, err := readWholeFile(p.e.fs, indexPath(seg.path))
	if err != nil {
		return 0, nil
	}
	err = seg.loadIndex(data, logical)
	switch {
	case errors.Is(err, ErrUnsupportedFormat):
		return 0, err
	case err == nil:
		return seg.size, nil
	}
	if err := p.e.fs.Remove(indexPath(seg.path)); err != nil && !isNotExist(err) {
		return 0, err
	}
	p.recoveryDirDirty = true
	return 0, nil
}

// rewrite writes bytes [from, to) of path again, as they read now.
func rewrite(fs vfs.FS, rf vfs.File, path string, from, to int64) error {
	if from >= to {
		return nil
	}
	wf, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer wf.Close()
	buf := make([]byte, min(to-from, 1<<20))
	for pos := from; pos < to; {
		n, err := readFull(rf, buf[:min(int64(len(buf)), to-pos)], pos, to)
		if err != nil {
			return err
		}
		if _, err := wf.WriteAt(buf[:n], pos); err != nil {
			return fmt.Errorf("engine: rewrite %s at %d: %w", path, pos, err)
		}
		pos += int64(n)
	}
	return nil
}

// sealRecovered makes what recovery kept durable: it fsyncs the segments
// it had to scan, writes the missing indexes of the sealed ones, and
// fsyncs the directory, so that the recovered log is entirely before the
// new checkpoint. The directory is fsynced whenever a segment was scanned:
// the previous run may have created the file and failed before the
// directory fsync that makes its entry durable, and the file's data is
// only durable once its entry is.
func (p *Partition) sealRecovered() error {
	wrote := false
	scanned := false
	for i, s := range p.segs {
		last := i == len(p.segs)-1
		s.sealed = !last
		if !s.rescanned {
			continue
		}
		scanned = true
		if err := s.rf.SyncData(); err != nil {
			return fmt.Errorf("engine: fsync %s: %w", s.path, err)
		}
		if !last {
			if err := writeIndexFile(p.e.fs, s, s.encodeIndex()); err != nil {
				return fmt.Errorf("engine: rebuild the index of %s: %w", s.path, err)
			}
			s.indexed, wrote = true, true
		}
	}
	if wrote || scanned || p.recoveryDirDirty {
		return syncDir(p.e.fs, p.dir)
	}
	return nil
}

// cutTail zeroes the active segment past its logical end and fsyncs it,
// so that the recovered log is durable and the garbage can never be read
// as batches.
func (p *Partition) cutTail(seg *segment, fileSize int64) error {
	wf, err := p.e.fs.OpenReadWrite(seg.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer wf.Close()
	zeros := make([]byte, min(fileSize-seg.size, 1<<20))
	for pos := seg.size; pos < fileSize; pos += int64(len(zeros)) {
		n := min(int64(len(zeros)), fileSize-pos)
		if _, err := wf.WriteAt(zeros[:n], pos); err != nil {
			return fmt.Errorf("engine: cut the torn tail of %s: %w", seg.path, err)
		}
	}
	if err := wf.Sync(); err != nil {
		return fmt.Errorf("engine: fsync %s after cutting its torn tail: %w", seg.path, err)
	}
	p.e.opts.Logger.Warn("torn tail cut", "file", seg.path, "at", seg.size, "file_size", fileSize)
	return nil
}
