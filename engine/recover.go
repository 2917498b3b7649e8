package engine

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// Recovery of one partition, at Open.
//
//  1. Load the durable state (start, epoch, lineage, reservation ceiling,
//     checkpoint, clean flag) and the producer-state snapshot.
//  2. Remove segments that lie wholly below the start offset (a purge or
//     retention whose directory sync did not survive brings them back) and
//     temporary files.
//  3. Sealed segments: load their index, or rebuild it by scanning. They
//     were fsynced before their successor was created, so any damage in
//     them (other than zeros past their end) is corruption.
//  4. The active segment: scan from the end its index covers, by
//     checksums. Damage before the checkpoint is corruption: the partition
//     is refused with a *CorruptLogError naming file and position. Damage
//     after it is a torn tail: the log ends before it, the rest of the file
//     is zeroed and the file fsynced (vfs has no Truncate).
//  5. Numbering. After a clean shutdown the next offset is the recorded
//     one. Otherwise offsets up to the reservation ceiling may have been
//     handed out, so numbering continues at the ceiling; under interval and
//     none, records a reader may have seen were possibly lost, so the
//     history epoch is bumped with a lossy-recovery transition recording
//     the end that was kept. The ceiling is then lowered to the next
//     offset, so a partition that takes no append before the next crash
//     recovers without a bump.
func (p *Partition) recover() error {
	e := p.e
	st, err := p.loadState()
	if err != nil {
		return err
	}
	p.durable = st
	snap, err := p.loadProducers()
	if err != nil {
		return err
	}
	bases, err := p.listSegments(st.start)
	if err != nil {
		return err
	}
	prod := snap.state
	applyHeader := func(h wire.BatchHeader) {
		if h.BaseOffset >= snap.asOf {
			if r, ok := prodRecOf(h); ok {
				applyProducer(prod, r)
			}
		}
	}
	var end uint64 = st.start
	p.maxTS = minTS
	for i, base := range bases {
		last := i == len(bases)-1
		seg, err := p.openSegment(base, max(end, base), last, st, snap.asOf, applyHeader)
		if err != nil {
			var ce *CorruptLogError
			if errors.As(err, &ce) {
				p.corrupt = ce
				e.opts.Logger.Error("corrupt log; partition not served", "topic", p.t.name, "partition", p.index, "err", err)
				p.closeSegments()
				p.segs = nil
				return nil
			}
			return err
		}
		p.segs = append(p.segs, seg)
		end = max(end, seg.end)
		p.maxTS = max(p.maxTS, seg.maxTS)
	}
	// Durable data that is gone is corruption too.
	if st.cp.end > end && st.cp.end > st.start {
		name := p.segmentPath(st.cp.seg, segmentExt)
		p.corrupt = &CorruptLogError{File: name, Pos: st.cp.pos, Reason: fmt.Sprintf("the log ends at offset %d, below its durable end %d", end, st.cp.end)}
		e.opts.Logger.Error("corrupt log; partition not served", "topic", p.t.name, "partition", p.index, "err", p.corrupt)
		p.closeSegments()
		p.segs = nil
		return nil
	}

	next := end
	bumped := false
	switch {
	case st.clean:
		next = max(end, st.ceiling)
	case st.ceiling > end:
		next = st.ceiling
		bumped = p.cfg.Durability != DurabilityAlways
	}
	next = max(next, st.start)
	if bumped {
		st.epoch++
		st.lineage = append(slices.Clone(st.lineage), fence.HistoryTransition{
			Epoch: st.epoch, Start: next, Kind: fence.TransitionLossyRecovery, KeptEnd: end})
		e.opts.Logger.Warn("lossy recovery: history epoch bumped", "topic", p.t.name, "partition", p.index,
			"kept_end", end, "next", next, "epoch", st.epoch)
	}
	p.start, p.epoch, p.lineage = st.start, st.epoch, st.lineage
	p.next, p.writtenEnd, p.syncedEnd, p.ceiling = next, next, next, next
	p.producers = prod
	p.fl.durProd = cloneProducers(prod)
	p.fl.durAsOf = end
	if n := len(p.segs); n > 0 {
		a := p.segs[n-1]
		p.checkpoint = checkpoint{seg: a.base, pos: a.size, end: end}
	}
	return p.writeState(func(s *partState) {
		s.epoch, s.lineage, s.ceiling, s.clean = st.epoch, st.lineage, next, false
		if n := len(p.segs); n > 0 {
			a := p.segs[n-1]
			s.cp = checkpoint{seg: a.base, pos: a.size, end: end}
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
	pl, err := openValue(key, v, kindPartition)
	if err != nil {
		return partState{}, err
	}
	st, err := decodePartState(pl)
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

// listSegments returns the base offsets of the partition's segments,
// removing temporary files, indexes without a log, and segments wholly
// below start.
func (p *Partition) listSegments(start uint64) ([]uint64, error) {
	fs := p.e.fs
	if err := fs.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	names, err := fs.List(p.dir)
	if err != nil {
		return nil, err
	}
	var bases []uint64
	logs := make(map[uint64]bool)
	var junk []string
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, segmentExt):
			b, err := strconv.ParseUint(strings.TrimSuffix(n, segmentExt), 10, 64)
			if err != nil {
				junk = append(junk, n)
				continue
			}
			bases = append(bases, b)
			logs[b] = true
		case strings.HasSuffix(n, indexExt):
		default:
			junk = append(junk, n)
		}
	}
	for _, n := range names {
		if strings.HasSuffix(n, indexExt) {
			b, err := strconv.ParseUint(strings.TrimSuffix(n, indexExt), 10, 64)
			if err != nil || !logs[b] {
				junk = append(junk, n)
			}
		}
	}
	slices.Sort(bases)
	// A segment is wholly below start when its successor begins at or
	// below start; the last one stays (it is where appends go).
	keep := bases[:0:0]
	for i, b := range bases {
		if i+1 < len(bases) && bases[i+1] <= start {
			junk = append(junk, fmt.Sprintf("%020d%s", b, segmentExt), fmt.Sprintf("%020d%s", b, indexExt))
			continue
		}
		keep = append(keep, b)
	}
	for _, n := range junk {
		if err := fs.Remove(fs.PathJoin(p.dir, n)); err != nil && !isNotExist(err) {
			return nil, err
		}
	}
	if len(junk) > 0 {
		if err := syncDir(fs, p.dir); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

func isNotExist(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "no such file"))
}

// openSegment opens a segment, loads or rebuilds its index, and for the
// active (last) one finds its end and cuts a torn tail. minOffset is the
// end of the previous segment.
func (p *Partition) openSegment(base, minOffset uint64, active bool, st partState, snapAsOf uint64, applyHeader func(wire.BatchHeader)) (*segment, error) {
	fs := p.e.fs
	path := p.segmentPath(base, segmentExt)
	rf, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	seg := newSegment(base, path, rf)
	fi, err := rf.Stat()
	if err != nil {
		return nil, err
	}
	fileSize := fi.Size()
	seg.effCreated, seg.effLast = p.e.clock.now(), p.e.clock.now()
	seg.maxTS = p.maxTS

	// The index, if any, describes a prefix of the file that was durable
	// when it was written.
	scanFrom := int64(0)
	if data, err := readWholeFile(fs, indexPath(path)); err == nil {
		err := seg.loadIndex(data, fileSize)
		if errors.Is(err, ErrUnsupportedFormat) {
			return nil, err
		}
		if err == nil {
			scanFrom = seg.size
		}
	}
	// Producer state newer than the snapshot lives in the headers of the
	// indexed part too.
	if scanFrom > 0 && snapAsOf < seg.end {
		_, err := scanSegment(rf, seg.posFor(snapAsOf), scanFrom, 0, func(_ int64, h wire.BatchHeader, _ []byte) { applyHeader(h) })
		if err != nil {
			return nil, err
		}
	}
	if !active && scanFrom > 0 {
		seg.sealed = true
		return seg, nil
	}
	// Everything before durableLimit was fsynced.
	durableLimit := int64(0)
	switch {
	case !active || st.cp.seg > base:
		durableLimit = fileSize
	case st.cp.seg == base:
		durableLimit = st.cp.pos
	}
	partMax := seg.maxTS
	interval := int64(p.e.opts.IndexIntervalBytes)
	res, err := scanSegment(rf, scanFrom, fileSize, max(minOffset, seg.end), func(pos int64, h wire.BatchHeader, _ []byte) {
		seg.addBatch(pos, h.BaseOffset, h.LastOffset(), h.MaxTimestamp, &partMax, interval)
		applyHeader(h)
	})
	if err != nil {
		return nil, err
	}
	seg.size = res.end
	if res.badPos >= 0 {
		lostDurable := res.badPos < durableLimit && res.lastEnd < st.cp.end && st.cp.end > st.start
		if !active && !res.zeros {
			lostDurable = true
		}
		if lostDurable {
			return nil, &CorruptLogError{File: path, Pos: res.badPos, Reason: res.reason}
		}
		if active {
			if err := p.cutTail(seg, fileSize); err != nil {
				return nil, err
			}
		}
	}
	seg.sealed = !active
	return seg, nil
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

// readWholeFile reads a small file whole.
func readWholeFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > 1<<30 {
		return nil, fmt.Errorf("engine: %s is too large (%d bytes)", path, fi.Size())
	}
	b := make([]byte, fi.Size())
	if _, err := readFull(f, b, 0, fi.Size()); err != nil {
		return nil, err
	}
	return b, nil
}
