package sim

import (
	"errors"
	"io"
	"os"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// view is one process's access to a Disk (see Disk). It tracks what each
// write dirties and each fsync makes durable, turns an injected fsync
// failure with Drop into lost ranges, and does nothing once the process is
// dead.
type view struct {
	d    *Disk
	fs   vfs.FS // errorfs over the MemFS
	dead atomic.Bool
}

var _ vfs.FS = (*view)(nil)

func (v *view) isDead() bool { return v.dead.Load() }

func (v *view) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &viewFile{v: v, path: name, f: f}, nil
}

func (v *view) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if v.isDead() {
		return nil, errDead
	}
	f, err := v.fs.Create(name, category)
	if err == nil {
		// A new, empty file: nothing of an earlier one at this path counts.
		v.d.removed(name)
	}
	return v.wrap(name, f, err)
}

func (v *view) Link(oldname, newname string) error {
	if v.isDead() {
		return errDead
	}
	return v.fs.Link(oldname, newname)
}

func (v *view) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := v.fs.Open(name, opts...)
	return v.wrap(name, f, err)
}

func (v *view) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if v.isDead() {
		return nil, errDead
	}
	f, err := v.fs.OpenReadWrite(name, category, opts...)
	return v.wrap(name, f, err)
}

func (v *view) OpenDir(name string) (vfs.File, error) {
	f, err := v.fs.OpenDir(name)
	return v.wrap(name, f, err)
}

func (v *view) Remove(name string) error {
	if v.isDead() {
		return errDead
	}
	size := v.sizeOf(name)
	err := v.fs.Remove(name)
	if err == nil {
		v.d.removed(name)
		v.d.freed(size)
	}
	return err
}

func (v *view) RemoveAll(name string) error {
	if v.isDead() {
		return errDead
	}
	err := v.fs.RemoveAll(name)
	if err == nil {
		v.d.removed(name)
	}
	return err
}

func (v *view) Rename(oldname, newname string) error {
	if v.isDead() {
		return errDead
	}
	err := v.fs.Rename(oldname, newname)
	if err == nil {
		v.d.renamed(oldname, newname)
	}
	return err
}

func (v *view) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if v.isDead() {
		return nil, errDead
	}
	f, err := v.fs.ReuseForWrite(oldname, newname, category)
	if err == nil {
		v.d.renamed(oldname, newname)
	}
	return v.wrap(newname, f, err)
}

func (v *view) MkdirAll(dir string, perm os.FileMode) error {
	if v.isDead() {
		return errDead
	}
	return v.fs.MkdirAll(dir, perm)
}

// Lock takes the lock. Its closer is the MemFS's own, so a dead process's
// engine still releases it when it closes, and the next process can take
// it.
func (v *view) Lock(name string) (io.Closer, error) {
	if v.isDead() {
		return nil, errDead
	}
	return v.fs.Lock(name)
}

func (v *view) List(dir string) ([]string, error) { return v.fs.List(dir) }

func (v *view) Stat(name string) (vfs.FileInfo, error) { return v.fs.Stat(name) }

func (v *view) PathBase(path string) string { return v.fs.PathBase(path) }

func (v *view) PathJoin(elem ...string) string { return v.fs.PathJoin(elem...) }

func (v *view) PathDir(path string) string { return v.fs.PathDir(path) }

// GetDiskUsage reports the room of a full disk, and plenty otherwise
// (the MemFS cannot say).
func (v *view) GetDiskUsage(path string) (vfs.DiskUsage, error) { return v.d.usage(), nil }

func (v *view) Unwrap() vfs.FS { return v.fs }

// viewFile is a file handle of a view.
type viewFile struct {
	v    *view
	path string
	f    vfs.File
	pos  int64 // for Write
}

func (f *viewFile) Close() error { return f.f.Close() }

func (f *viewFile) Read(p []byte) (int, error) { return f.f.Read(p) }

func (f *viewFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

func (f *viewFile) Write(p []byte) (int, error) {
	if f.v.isDead() {
		return 0, errDead
	}
	fits := f.spaceFor(p, f.pos)
	n, err := f.f.Write(p[:fits])
	if n > 0 {
		f.v.d.wrote(f.path, f.pos, f.pos+int64(n))
		f.pos += int64(n)
	}
	if err == nil && fits < len(p) {
		err = errNoSpace(f.path)
	}
	return n, err
}

func (f *viewFile) WriteAt(p []byte, off int64) (int, error) {
	if f.v.isDead() {
		return 0, errDead
	}
	fits := f.spaceFor(p, off)
	n, err := f.f.WriteAt(p[:fits], off)
	if n > 0 {
		f.v.d.wrote(f.path, off, off+int64(n))
	}
	if err == nil && fits < len(p) {
		err = errNoSpace(f.path)
	}
	return n, err
}

func (f *viewFile) Preallocate(offset, length int64) error {
	if f.v.isDead() {
		return errDead
	}
	return f.f.Preallocate(offset, length)
}

func (f *viewFile) Stat() (vfs.FileInfo, error) { return f.f.Stat() }

func (f *viewFile) sync(do func() error) error {
	if f.v.isDead() {
		return errDead
	}
	err := do()
	switch {
	case err == nil:
		f.v.d.synced(f.path)
	case errors.Is(err, errInjected):
		if derr := f.v.d.syncFailed(f.path, f.v.d.inj.lastDrop()); derr != nil {
			return errors.Join(err, derr)
		}
	}
	return err
}

func (f *viewFile) Sync() error { return f.sync(f.f.Sync) }

func (f *viewFile) SyncData() error { return f.sync(f.f.SyncData) }

// SyncTo counts as an fsync only when it reports a full one (MemFS's
// never does).
func (f *viewFile) SyncTo(length int64) (bool, error) {
	if f.v.isDead() {
		return false, errDead
	}
	full, err := f.f.SyncTo(length)
	switch {
	case err == nil && full:
		f.v.d.synced(f.path)
	case errors.Is(err, errInjected):
		if derr := f.v.d.syncFailed(f.path, f.v.d.inj.lastDrop()); derr != nil {
			return false, errors.Join(err, derr)
		}
	}
	return full, err
}

func (f *viewFile) Prefetch(offset, length int64) error { return f.f.Prefetch(offset, length) }

func (f *viewFile) Fd() uintptr { return f.f.Fd() }
