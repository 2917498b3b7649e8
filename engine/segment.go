package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine/internal/codec"
	"github.com/ledgemq/ledge/record"
)

// A segment is one file of a partition's log, `<base offset>.log` (20
// digits), holding whole batches back to back, with a sparse index kept in
// memory and, once the segment is sealed, in `<base offset>.idx`.
//
// The offset index maps the base offset of a batch to its byte position,
// one entry per IndexIntervalBytes; the time index maps the largest
// timestamp seen so far (monotone, whatever the producers' clocks do) to a
// batch, with the same spacing. Both are searched in O(log n).
type segment struct {
	base uint64
	path string
	rf   vfs.File // shared read handle (ReadAt is safe for concurrent use)

	refs    atomic.Int64 // 1 for the partition + 1 per read plan
	closeMu sync.Mutex
	closed  bool

	// Guarded by the partition's mu.
	size       int64  // logical bytes: everything after is not the log
	end        uint64 // exclusive end offset of its batches (base if empty)
	maxTS      int64  // largest timestamp so far at its end
	effLast    int64  // jump-free clock (ms) of its last append
	effCreated int64  // jump-free clock (ms) when it was created
	sealed     bool
	indexed    bool // sealed, fsynced and its index file written
	rescanned  bool // read by recovery, not trusted from an index
	deleted    bool
	offs       []offEntry
	times      []timeEntry
}

type offEntry struct {
	off uint64
	pos int64
}

type timeEntry struct {
	ts  int64 // largest timestamp up to and including the batch
	off uint64
	pos int64
}

func newSegment(base uint64, path string, rf vfs.File) *segment {
	s := &segment{base: base, path: path, rf: rf, end: base, maxTS: math.MinInt64}
	s.refs.Store(1)
	return s
}

// acquire takes a reference for a read plan.
func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference; the last one closes the read handle.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.closeMu.Lock()
		defer s.closeMu.Unlock()
		if !s.closed && s.rf != nil {
			s.closed = true
			_ = s.rf.Close()
		}
	}
}

// addBatch notes a batch written at pos (partition mu held).
func (s *segment) addBatch(pos int64, base, last uint64, maxTS int64, partMax *int64, interval int64) {
	if n := len(s.offs); n == 0 || pos-s.offs[n-1].pos >= interval {
		s.offs = append(s.offs, offEntry{off: base, pos: pos})
	}
	if maxTS > *partMax {
		*partMax = maxTS
	}
	if *partMax > s.maxTS || s.maxTS == math.MinInt64 {
		if n := len(s.times); n == 0 || (pos-s.times[n-1].pos >= interval && *partMax > s.times[n-1].ts) {
			s.times = append(s.times, timeEntry{ts: *partMax, off: base, pos: pos})
		}
	}
	s.maxTS = max(s.maxTS, *partMax)
	s.end = last + 1
}

// posFor returns the position of the last indexed batch whose base offset
// is at most off (0 if none).
func (s *segment) posFor(off uint64) int64 {
	i := sort.Search(len(s.offs), func(i int) bool { return s.offs[i].off > off })
	if i == 0 {
		return 0
	}
	return s.offs[i-1].pos
}

// posForTime returns where to start scanning for the first batch whose
// running maximum timestamp is at least ts.
func (s *segment) posForTime(ts int64) int64 {
	i := sort.Search(len(s.times), func(i int) bool { return s.times[i].ts >= ts })
	if i == 0 {
		return 0
	}
	return s.times[i-1].pos
}

// Index file: a codec envelope of kindIndex around
//
//	base, size, end, maxTS, effLast, effCreated,
//	n, n × (offset delta, position delta), m, m × (ts delta, offset, position)
//
// It describes the log's first size bytes; a log of another size makes it
// stale and it is rebuilt by scanning.
func (s *segment) encodeIndex() []byte {
	b := binary.AppendUvarint(nil, s.base)
	b = binary.AppendUvarint(b, uint64(s.size))
	b = binary.AppendUvarint(b, s.end)
	b = binary.AppendVarint(b, s.maxTS)
	b = binary.AppendVarint(b, s.effLast)
	b = binary.AppendVarint(b, s.effCreated)
	b = binary.AppendUvarint(b, uint64(len(s.offs)))
	var po uint64
	var pp int64
	for _, e := range s.offs {
		b = binary.AppendUvarint(b, e.off-po)
		b = binary.AppendUvarint(b, uint64(e.pos-pp))
		po, pp = e.off, e.pos
	}
	b = binary.AppendUvarint(b, uint64(len(s.times)))
	for _, e := range s.times {
		b = binary.AppendVarint(b, e.ts)
		b = binary.AppendUvarint(b, e.off)
		b = binary.AppendUvarint(b, uint64(e.pos))
	}
	return codec.Seal(nil, kindIndex, kindVersion, b)
}

// loadIndex loads an index file into s if it describes a prefix of a log
// of fileSize bytes starting at s.base; otherwise it reports it stale.
func (s *segment) loadIndex(data []byte, fileSize int64) error {
	p, _, err := codec.Open(data, kindIndex, kindVersion)
	if errors.Is(err, codec.ErrNewerVersion) {
		return fmt.Errorf("%w: %v", ErrUnsupportedFormat, err)
	}
	if err != nil {
		return errStaleIndex
	}
	r := codec.NewReader(p)
	base, size, end := r.Uvarint(), int64(r.Uvarint()), r.Uvarint()
	maxTS, effLast, effCreated := r.Varint(), r.Varint(), r.Varint()
	n := r.Count(2)
	offs := make([]offEntry, 0, n)
	var po uint64
	var pp int64
	for i := 0; i < n; i++ {
		po += r.Uvarint()
		pp += int64(r.Uvarint())
		offs = append(offs, offEntry{off: po, pos: pp})
	}
	m := r.Count(3)
	times := make([]timeEntry, 0, m)
	for i := 0; i < m; i++ {
		times = append(times, timeEntry{ts: r.Varint(), off: r.Uvarint(), pos: int64(r.Uvarint())})
	}
	if r.Done() != nil || base != s.base || size > fileSize || end < base {
		return errStaleIndex
	}
	s.size, s.end, s.maxTS, s.effLast, s.effCreated, s.offs, s.times = size, end, maxTS, effLast, effCreated, offs, times
	return nil
}

var errStaleIndex = errors.New("engine: stale segment index")

// scanResult is where a scan of a segment file stopped.
type scanResult struct {
	end     int64 // position after the last valid batch
	lastEnd uint64
	badPos  int64 // position of the first invalid bytes, -1 if none
	reason  string
	zeros   bool // everything from badPos to the end of the file is zero
}

// scanSegment reads f (fileSize bytes) from pos, verifying every batch
// (CRC included) and requiring increasing offsets above minOffset, and
// calls fn for each valid batch. It stops at the first invalid bytes.
func scanSegment(f vfs.File, pos, fileSize int64, minOffset uint64, fn func(pos int64, h record.BatchHeader, b []byte)) (scanResult, error) {
	res := scanResult{end: pos, badPos: -1, lastEnd: minOffset}
	// No larger than what is left to scan: recovery scans every segment
	// it has no index for, most of them far smaller than a MiB.
	buf := make([]byte, min(1<<20, max(fileSize-pos, record.BatchHeaderSize)))
	var have []byte // buffered bytes starting at bufPos
	bufPos := pos
	for pos < fileSize {
		if int64(len(have)) < record.BatchHeaderSize && bufPos+int64(len(have)) < fileSize {
			n, err := readFull(f, buf, pos, fileSize)
			if err != nil {
				return res, err
			}
			have, bufPos = buf[:n], pos
		}
		h, err := record.ParseBatchHeader(have)
		if err == nil && int64(h.Length) > fileSize-pos {
			err = fmt.Errorf("batch of %d bytes runs past the end of the file", h.Length)
		}
		if err == nil && int(h.Length) > len(have) {
			if int(h.Length) > len(buf) {
				buf = make([]byte, h.Length)
			}
			n, rerr := readFull(f, buf, pos, fileSize)
			if rerr != nil {
				return res, rerr
			}
			have, bufPos = buf[:n], pos
		}
		if err == nil {
			h, err = record.VerifyBatch(have[:h.Length], 0)
		}
		if err == nil && h.BaseOffset < res.lastEnd {
			err = fmt.Errorf("batch at offset %d does not follow offset %d", h.BaseOffset, res.lastEnd)
		}
		if err != nil {
			res.badPos, res.reason = pos, err.Error()
			z, zerr := allZero(f, pos, fileSize)
			if zerr != nil {
				return res, zerr
			}
			res.zeros = z
			return res, nil
		}
		fn(pos, h, have[:h.Length])
		pos += int64(h.Length)
		have = have[h.Length:]
		bufPos = pos
		res.end, res.lastEnd = pos, h.LastOffset()+1
	}
	return res, nil
}

// readFull reads from pos into buf, up to len(buf) or the end of the file.
func readFull(f vfs.File, buf []byte, pos, fileSize int64) (int, error) {
	n := int(min(int64(len(buf)), fileSize-pos))
	m, err := f.ReadAt(buf[:n], pos)
	if err != nil && !(errors.Is(err, io.EOF) && m == n) {
		return m, err
	}
	return m, nil
}

func allZero(f vfs.File, pos, fileSize int64) (bool, error) {
	buf := make([]byte, min(64<<10, max(fileSize-pos, 1)))
	for pos < fileSize {
		n, err := readFull(f, buf, pos, fileSize)
		if err != nil {
			return false, err
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		pos += int64(n)
	}
	return true, nil
}

// writeIndexFile writes s's index next to its log: to a temporary file,
// fsynced, then renamed. The caller fsyncs the directory. A disk with no
// room for it is no error: an index only saves recovery a scan of the
// segment (whose bytes past its end are zeros, see roll), so the segment
// goes without one and the temporary file is removed.
func writeIndexFile(fs vfs.FS, s *segment, data []byte) error {
	path := s.path[:len(s.path)-len(".log")] + ".idx"
	tmp := path + ".tmp"
	err := writeFileSynced(fs, tmp, data)
	if err == nil {
		return fs.Rename(tmp, path)
	}
	if IsDiskFull(err) {
		if rerr := fs.Remove(tmp); rerr != nil && !isNotExist(rerr) {
			return rerr
		}
		return nil
	}
	return err
}

// writeFileSynced creates path holding data, fsynced.
func writeFileSynced(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func indexPath(logPath string) string { return logPath[:len(logPath)-len(".log")] + ".idx" }
