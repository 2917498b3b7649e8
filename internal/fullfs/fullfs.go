package fullfs

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a vfs.FS of limited size. Its methods are safe for concurrent use.
type FS struct {
	vfs.FS
	mu     sync.Mutex // orders size changes, so that used stays exact
	budget atomic.Int64
	used   atomic.Int64
	full   atomic.Int64 // writes refused so far
}

// Wrap returns fs limited to budget bytes, counting the files fs already
// holds under root.
func Wrap(fs vfs.FS, root string, budget int64) *FS {
	f := &FS{FS: fs}
	f.budget.Store(budget)
	f.used.Store(treeSize(fs, root))
	return f
}

// SetBudget changes the size of the disk: raising it frees space.
func (f *FS) SetBudget(n int64) { f.budget.Store(n) }

// Fill lowers the budget to what is used now plus n bytes.
func (f *FS) Fill(n int64) { f.budget.Store(f.used.Load() + n) }

// Used returns the bytes all files hold.
func (f *FS) Used() int64 { return f.used.Load() }

// Refusals returns how many writes found the disk full.
func (f *FS) Refusals() int64 { return f.full.Load() }

func (f *FS) noSpace(op, path string) error {
	f.full.Add(1)
	return &os.PathError{Op: op, Path: path, Err: syscall.ENOSPC}
}

func treeSize(fs vfs.FS, path string) int64 {
	st, err := fs.Stat(path)
	if err != nil {
		return 0
	}
	if !st.IsDir() {
		return st.Size()
	}
	names, err := fs.List(path)
	if err != nil {
		return 0
	}
	var n int64
	for _, name := range names {
		n += treeSize(fs, fs.PathJoin(path, name))
	}
	return n
}

func (f *FS) sizeOf(path string) int64 {
	if st, err := f.FS.Stat(path); err == nil && !st.IsDir() {
		return st.Size()
	}
	return 0
}

// Create truncates an existing file: its bytes are given back.
func (f *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.sizeOf(name)
	file, err := f.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	f.used.Add(-old)
	return &limitedFile{File: file, fs: f, path: name}, nil
}

func (f *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		return nil, err
	}
	return &limitedFile{File: file, fs: f, path: name}, nil
}

func (f *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	over := f.sizeOf(newname)
	file, err := f.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	f.used.Add(-over)
	return &limitedFile{File: file, fs: f, path: newname}, nil
}

func (f *FS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.sizeOf(name)
	if err := f.FS.Remove(name); err != nil {
		return err
	}
	f.used.Add(-n)
	return nil
}

func (f *FS) RemoveAll(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := treeSize(f.FS, name)
	if err := f.FS.RemoveAll(name); err != nil {
		return err
	}
	f.used.Add(-n)
	return nil
}

func (f *FS) Rename(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	over := f.sizeOf(newname)
	if err := f.FS.Rename(oldname, newname); err != nil {
		return err
	}
	f.used.Add(-over)
	return nil
}

func (f *FS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	b, u := f.budget.Load(), f.used.Load()
	return vfs.DiskUsage{AvailBytes: uint64(max(b-u, 0)), TotalBytes: uint64(max(b, u)), UsedBytes: uint64(u)}, nil
}

func (f *FS) Unwrap() vfs.FS { return f.FS }

// limitedFile charges the growth of a file to its FS.
type limitedFile struct {
	vfs.File
	fs   *FS
	path string
	pos  int64 // where Write writes: files are opened at their start
}

// room returns how many of n bytes written at off fit, charging the
// growth they cause.
func (w *limitedFile) room(off int64, n int) (int, error) {
	st, err := w.File.Stat()
	if err != nil {
		return 0, err
	}
	size, end := st.Size(), off+int64(n)
	if end <= size {
		return n, nil
	}
	avail := w.fs.budget.Load() - w.fs.used.Load()
	grow := end - size
	if grow > avail {
		fit := max(size+max(avail, 0)-off, 0)
		w.fs.used.Add(max(off+fit-size, 0))
		return int(fit), nil
	}
	w.fs.used.Add(grow)
	return n, nil
}

func (w *limitedFile) WriteAt(p []byte, off int64) (int, error) {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	fit, err := w.room(off, len(p))
	if err != nil {
		return 0, err
	}
	n, err := w.File.WriteAt(p[:fit], off)
	if err == nil && fit < len(p) {
		err = w.fs.noSpace("write", w.path)
	}
	return n, err
}

func (w *limitedFile) Write(p []byte) (int, error) {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	fit, err := w.room(w.pos, len(p))
	if err != nil {
		return 0, err
	}
	n, err := w.File.Write(p[:fit])
	w.pos += int64(n)
	if err == nil && fit < len(p) {
		err = w.fs.noSpace("write", w.path)
	}
	return n, err
}

var _ io.WriterAt = (*limitedFile)(nil)
