package sim

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A full disk. Disk.Fill leaves a number of bytes of room; from then on
// every write that grows a file (the log's segments and indexes, the
// metadata store's WAL and tables, the ballast) takes its growth from the
// room, and one that needs more than is left writes what fits (a short
// write) and fails with ENOSPC, as a real file system does. Overwriting
// bytes a file already has takes no room. Removing a file gives its bytes
// back (retention, a purge's cleanup, the engine releasing its ballast);
// Disk.Free ends the episode (an operator made room).
//
// The engine must treat this as what it is, not as a failed fsync: the
// append that hit it is refused (retryable), nothing acknowledged is
// lost, the partition is not failed, and appends resume once there is
// room again.

// FullDiskMode widens the full disk to what the engine does not survive
// yet, or breaks it, for tests that show the checks fail (Config.FullDisk).
type FullDiskMode struct {
	// Meta: the metadata store's files take room too. Without it they
	// do not: the store fails for good at a write that hits a full disk
	// (filed separately), and the node with it, so the simulator narrows
	// the fault to the log's files until that is fixed.
	Meta bool
	// NeverFreed: the room an operator makes is taken at once, so the
	// disk stays full (the engine cannot resume: the check that appends
	// resume must fail).
	NeverFreed bool
}

func (d *Disk) withMode(m FullDiskMode) *Disk {
	d.mode = m
	return d
}

// noRoom is the room of a disk that is not full.
const noRoom = -1

// Fill makes the disk full but for room bytes.
func (d *Disk) Fill(room int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.room = room
}

// Free ends a full disk.
func (d *Disk) Free() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.room = noRoom
}

// IsFull reports whether the disk is full (Fill without Free since).
func (d *Disk) IsFull() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.room != noRoom
}

// NoSpaceHits returns the writes that hit the full disk since the last
// call, for the trace.
func (d *Disk) NoSpaceHits() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.noSpace
	d.noSpace = nil
	return h
}

// claim returns how many of n bytes written at off into a file of size
// bytes fit on the disk, taking their growth from the room.
func (d *Disk) claim(path string, size, off int64, n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.room == noRoom || (!d.mode.Meta && strings.Contains(path, "/meta/")) {
		return n
	}
	grow := max(0, off+int64(n)-max(size, off))
	if grow <= d.room {
		d.room -= grow
		return n
	}
	fits := int(max(0, size-off) + d.room)
	d.room = 0
	d.noSpace = append(d.noSpace, fmt.Sprintf("no space for %d bytes at %d of %s (%d written)", n, off, shortPath(path), fits))
	return min(fits, n)
}

// plenty is the room a disk that is not full reports.
const plenty = 1 << 40

// usage is what the disk reports of its room.
func (d *Disk) usage() vfs.DiskUsage {
	d.mu.Lock()
	defer d.mu.Unlock()
	avail := uint64(plenty)
	if d.room != noRoom {
		avail = uint64(d.room)
	}
	return vfs.DiskUsage{AvailBytes: avail, TotalBytes: 2 * plenty, UsedBytes: 2*plenty - avail}
}

// freed gives the bytes of a removed file back to a full disk.
func (d *Disk) freed(size int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.room != noRoom {
		d.room += size
	}
}

// errNoSpace is what a write that hit the full disk returns.
func errNoSpace(path string) error {
	return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
}

// spaceFor returns how many of len(p) bytes at off fit, for f.
func (f *viewFile) spaceFor(p []byte, off int64) int {
	size := int64(0)
	if st, err := f.f.Stat(); err == nil {
		size = st.Size()
	}
	return f.v.d.claim(f.path, size, off, len(p))
}

// sizeOf returns the size of name, or 0.
func (v *view) sizeOf(name string) int64 {
	if st, err := v.fs.Stat(name); err == nil && !st.IsDir() {
		return st.Size()
	}
	return 0
}

// fillOp fills the disk, leaving room bytes.
type fillOp struct{ room int64 }

func (o fillOp) String() string { return fmt.Sprintf("disk full (%d bytes left)", o.room) }

func (o fillOp) Run(w *World) (string, error) {
	w.Disk.Fill(o.room)
	return "", nil
}

// freeOp ends a full disk, and checks that appends resume (within the
// second the engine may take to look for room): one record to each live
// partition that has not failed for another reason is acknowledged.
type freeOp struct{}

func (freeOp) String() string { return "disk space freed" }

func (freeOp) Run(w *World) (string, error) {
	w.Disk.Free()
	if w.cfg.FullDisk.NeverFreed {
		w.Disk.Fill(0)
	}
	// The engine looks for room at most once a second, when an append
	// comes: appends resume within that.
	time.Sleep(time.Second)
	w.cfg.Settle()
	var out []string
	for _, p := range w.Live() {
		if p.Engine.State().Failed != nil || w.metaFailed {
			continue
		}
		res, err := w.produce(p, 1)
		if err != nil {
			return "", err
		}
		out = append(out, p.String()+" "+res)
		if (!strings.HasSuffix(res, "acknowledged") || strings.Contains(res, "not acknowledged")) && !w.faultFired() {
			w.violate("%s: an append after the disk had room again: %s", p, res)
		}
	}
	return strings.Join(out, "; "), nil
}

// checkNotFailedForSpace checks that no partition failed because the disk
// was full: a full disk refuses appends, it does not fail the log.
func (w *World) checkNotFailedForSpace(p *Partition) {
	if err := p.Engine.State().Failed; err != nil && isNoSpace(err) {
		w.violate("%s: failed for a full disk: %v", p, err)
	}
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), syscall.ENOSPC.Error())
}

// spaceGenerators fill the disk now and then, and free it a few steps
// later.
func spaceGenerators() []Generator {
	return []Generator{
		{Name: "fill", Weight: func(w *World) int {
			if w.Disk.IsFull() {
				return 0
			}
			return 2
		}, Next: func(w *World) Op {
			return fillOp{room: []int64{0, 100, 2000, 6000}[w.Rng.IntN(4)]}
		}},
		{Name: "free", Weight: func(w *World) int {
			if w.Disk.IsFull() {
				return 8
			}
			return 0
		}, Next: func(w *World) Op { return freeOp{} }},
	}
}
