package engine

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The files of a partition's directory, as recovery finds and tidies them.

// listSegments returns the base offsets of the partition's segments,
// removing temporary files, indexes without a log, and segments wholly
// below start (but the last). It fsyncs the directory if it removed
// anything or if mustSync (a cleanup obligation is pending).
func (p *Partition) listSegments(start uint64, mustSync bool) ([]uint64, error) {
	fs := p.e.fs
	if err := mkdirDurable(fs, p.dir, p.e.fs.PathJoin(p.e.opts.Dir, topicsDirName)); err != nil {
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
	if len(junk) > 0 || mustSync {
		if err := syncDir(fs, p.dir); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// rebaseFirstSegment makes the log's first segment begin at the start
// offset, and reports whether the segments before it were lost.
//
// A segment is created at the end of the one before it, or, when the log
// holds none, at the first offset written since: at the start, or where
// the last recovery resumed numbering. A first segment beginning anywhere
// else lost its predecessors to a power loss (a roll creates the new file
// before the directory fsync that makes either entry durable), and with
// them the records in [start, its base). Renamed to begin at the start
// (the gap then lies inside it, as a lossy recovery's gap does inside
// the active segment), it no longer looks so to a later recovery, once
// the last recovery's resume point has moved on.
func (p *Partition) rebaseFirstSegment(bases []uint64, st *partState) (lost bool, err error) {
	if len(bases) == 0 || bases[0] <= st.start {
		return false, nil
	}
	fs, b := p.e.fs, bases[0]
	lost = b != st.resumed
	// The index names its base: the segment is scanned and indexed anew.
	if err := fs.Remove(p.segmentPath(b, indexExt)); err != nil && !isNotExist(err) {
		return false, err
	}
	if err := fs.Rename(p.segmentPath(b, segmentExt), p.segmentPath(st.start, segmentExt)); err != nil {
		return false, err
	}
	if err := syncDir(fs, p.dir); err != nil {
		return false, err
	}
	bases[0] = st.start
	if st.cp.seg > st.start && st.cp.seg <= b {
		if st.cp.seg == b && st.cp.pos == 0 {
			// A checkpoint of the segment empty: its end was the old
			// base, below which nothing was durable.
			st.cp.end = st.start
		}
		st.cp.seg = st.start
	}
	if lost {
		p.e.opts.Logger.Warn("segments before the first lost", "topic", p.t.name, "partition", p.index,
			"start", st.start, "first_segment", b)
	}
	return lost, nil
}

// mkdirDurable makes sure dir exists, and if it had to create it or any
// directory above it (up to root, which exists), fsyncs each one it
// created and the directory holding it: files later made durable in dir
// must be reachable after a power loss.
func mkdirDurable(fs vfs.FS, dir, root string) error {
	if _, err := fs.Stat(dir); err == nil {
		return nil
	}
	var created []string
	for d := dir; d != root && d != "." && d != "/" && d != ""; d = fs.PathDir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		created = append(created, d)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		if err := syncDir(fs, d); err != nil {
			return err
		}
		if err := syncDir(fs, fs.PathDir(d)); err != nil {
			return err
		}
	}
	return nil
}

func isNotExist(err error) bool {
	return err != nil && (errors.Is(err, os.ErrNotExist) || oserror.IsNotExist(err))
}

// removeSegments removes the files of the segments at bases.
func (p *Partition) removeSegments(bases []uint64) error {
	fs := p.e.fs
	for _, b := range bases {
		for _, ext := range []string{segmentExt, indexExt} {
			if err := fs.Remove(p.segmentPath(b, ext)); err != nil && !isNotExist(err) {
				return err
			}
		}
	}
	return syncDir(fs, p.dir)
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
