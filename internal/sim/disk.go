package sim

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// Disk is the simulated storage device of a node:
//
//	engine → view (this file) → errorfs (injector) → vfs.MemFS (crashable)
//
// The MemFS keeps what was written and what was synced; CrashClone makes
// the image a power loss leaves. errorfs fails the calls an armed Fault
// matches. The view adds what neither models:
//
//   - a failed fsync that drops the file's unsynced data: the byte ranges
//     written since the file's last successful fsync are "lost" — reads
//     still see the new bytes (they are in the page cache), later fsyncs
//     report success without writing them, and a power loss returns what
//     was on disk before, unless the range was written again since;
//   - a power loss that leaves garbage in a sector that was being written
//     (its bytes being written; only in the log's files: the metadata
//     store's own torn-write handling is pebble's business);
//   - the death of a process: its view stops changing anything, so the
//     engine it ran can be closed without touching the disk, and a new
//     process opens a new view of the same MemFS (page cache intact).
type Disk struct {
	mem *vfs.MemFS
	inj *injector

	mu    sync.Mutex
	files map[string]*fileState // by path
	live  *view
	// room is what is left of a full disk, noRoom when it is not full
	// (space.go); noSpace, the writes that hit it, for the trace.
	room    int64
	noSpace []string
	mode    FullDiskMode
}

// fileState is what the view knows of one file beyond the MemFS.
type fileState struct {
	dirty spans       // written since the last successful fsync
	lost  []lostRange // dropped by a failed fsync
}

// lostRange is a range whose bytes a failed fsync dropped: at a power loss
// it holds old again.
type lostRange struct {
	at  int64
	old []byte
}

// NewDisk returns an empty disk.
func NewDisk() *Disk {
	return &Disk{mem: vfs.NewCrashableMem(), inj: &injector{}, files: map[string]*fileState{}, room: noRoom}
}

// FS returns a new view of the disk for a new process; the previous view
// dies (see Kill).
func (d *Disk) FS() vfs.FS {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live != nil {
		d.live.dead.Store(true)
	}
	d.live = &view{d: d, fs: errorfs.Wrap(d.mem, d.inj)}
	d.inj.mu.Lock()
	d.inj.walFailed = false
	d.inj.mu.Unlock()
	return d.live
}

// Kill ends the live view: the process using it is dead, and nothing it
// does from now on reaches the disk.
func (d *Disk) Kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live != nil {
		d.live.dead.Store(true)
		d.live = nil
	}
}

// Arm arms a fault; Disarm cancels it. At most one fault is armed.
func (d *Disk) Arm(f Fault) { d.inj.arm(f) }

// Disarm cancels the armed fault, if any.
func (d *Disk) Disarm() { d.inj.disarm() }

// MetaFailed reports whether the metadata WAL failed since the process
// started.
func (d *Disk) MetaFailed() bool {
	d.inj.mu.Lock()
	defer d.inj.mu.Unlock()
	return d.inj.walFailed
}

// Armed reports whether a fault waits for its call.
func (d *Disk) Armed() bool { return d.inj.isArmed() }

// Fired returns the failures injected since the last call.
func (d *Disk) Fired() []string { return d.inj.takeFired() }

// PowerLoss replaces the disk's contents with what a power loss leaves
// (see crashImage): everything synced, and each unsynced block or
// directory entry of the log with probability unsyncedPct; lost ranges
// hold their old bytes again; with probability garbagePct, one sector
// being written in each file of the log holds garbage. The live view must
// be dead (Kill).
func (d *Disk) PowerLoss(rng *rand.Rand, unsyncedPct, garbagePct int) error {
	return d.PowerLossWith(rng, unsyncedPct, garbagePct, nil)
}

// PowerLossWith is PowerLoss where fates, if not nil, decides which
// unsynced new entries of the log survive, by file name (see crashImage).
func (d *Disk) PowerLossWith(rng *rand.Rand, unsyncedPct, garbagePct int, fates map[string]bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live != nil {
		return errors.New("sim: power loss with a live process")
	}
	img, err := crashImage(d.mem, rng, unsyncedPct, fates)
	if err != nil {
		return err
	}
	for _, path := range sortedKeys(d.files) {
		st := d.files[path]
		for _, l := range st.lost {
			if err := overwrite(img, path, l.at, l.old); err != nil {
				return err
			}
		}
		if garbagePct > 0 && isEnginePath(path) && len(st.dirty) > 0 && rng.IntN(100) < garbagePct {
			if err := garble(img, path, st.dirty, rng); err != nil {
				return err
			}
		}
	}
	d.mem = img
	d.files = map[string]*fileState{}
	return nil
}

// Mem returns the MemFS holding the disk's contents now (for checks that
// read it directly).
func (d *Disk) Mem() *vfs.MemFS {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mem
}

const sectorSize = 512

// garble fills the written part of one sector overlapping dirty with
// random bytes, if the power loss left the file long enough to hold it.
// Bytes of the sector that were not being written keep their value: the
// disk is assumed to overwrite power-safely (SQLite's "powersafe
// overwrite"), as the engine's torn-tail rule assumes.
func garble(fs *vfs.MemFS, path string, dirty spans, rng *rand.Rand) error {
	st, err := fs.Stat(path)
	if err != nil {
		return nil // the file did not survive
	}
	x := dirty[rng.IntN(len(dirty))]
	pos := x.lo + rng.Int64N(x.hi-x.lo)
	lo := max(pos/sectorSize*sectorSize, x.lo)
	hi := min(lo/sectorSize*sectorSize+sectorSize, x.hi, st.Size())
	if lo >= hi {
		return nil
	}
	b := make([]byte, hi-lo)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return overwrite(fs, path, lo, b)
}

// overwrite writes b at off in path (if the file exists) and syncs it.
func overwrite(fs *vfs.MemFS, path string, off int64, b []byte) error {
	if _, err := fs.Stat(path); err != nil {
		return nil
	}
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (d *Disk) state(path string) *fileState {
	st := d.files[path]
	if st == nil {
		st = &fileState{}
		d.files[path] = st
	}
	return st
}

// wrote notes a successful write of [lo, hi) to path.
func (d *Disk) wrote(path string, lo, hi int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.state(path)
	st.dirty = st.dirty.add(lo, hi)
	// Written again: the new bytes are dirty pages that a later fsync does
	// write, so they are no longer lost.
	st.lost = splitLost(st.lost, lo, hi)
}

// splitLost removes [lo, hi) from every lost range.
func splitLost(ls []lostRange, lo, hi int64) []lostRange {
	var out []lostRange
	for _, l := range ls {
		end := l.at + int64(len(l.old))
		if end <= lo || l.at >= hi {
			out = append(out, l)
			continue
		}
		if l.at < lo {
			out = append(out, lostRange{at: l.at, old: l.old[:lo-l.at]})
		}
		if end > hi {
			out = append(out, lostRange{at: hi, old: l.old[hi-l.at:]})
		}
	}
	return out
}

// synced notes a successful fsync of path: what was dirty is on disk (but
// not what a failed fsync lost).
func (d *Disk) synced(path string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.files[path]; st != nil {
		st.dirty = nil
	}
}

// syncFailed notes a failed fsync of path; with drop, its unsynced ranges
// are lost: they hold what the disk held before.
func (d *Disk) syncFailed(path string, drop bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.files[path]
	if !drop || st == nil || len(st.dirty) == 0 {
		return nil
	}
	onDisk, err := readSynced(d.mem, path)
	if err != nil {
		return err
	}
	var covered spans
	for _, l := range st.lost {
		covered = covered.add(l.at, l.at+int64(len(l.old)))
	}
	for _, x := range st.dirty.minus(covered) {
		old := make([]byte, x.hi-x.lo)
		if x.lo < int64(len(onDisk)) {
			copy(old, onDisk[x.lo:min(x.hi, int64(len(onDisk)))])
		}
		st.lost = append(st.lost, lostRange{at: x.lo, old: old})
	}
	st.dirty = nil
	return nil
}

// readSynced returns the synced contents of path (empty if it has none).
func readSynced(mem *vfs.MemFS, path string) ([]byte, error) {
	snap := mem.CrashClone(vfs.CrashCloneCfg{})
	f, err := snap.Open(path)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	return io.ReadAll(f)
}

func (d *Disk) renamed(from, to string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st, ok := d.files[from]; ok {
		delete(d.files, from)
		d.files[to] = st
	} else {
		delete(d.files, to)
	}
}

func (d *Disk) removed(path string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for p := range d.files {
		if p == path || len(p) > len(path) && p[:len(path)] == path && p[len(path)] == '/' {
			delete(d.files, p)
		}
	}
}

// errDead is what a dead process's calls return.
var errDead = fmt.Errorf("sim: the process is dead: %w", os.ErrClosed)
