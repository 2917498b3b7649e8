package fullfs

import (
	"io"
	"os"
	"strings"
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
	// alloc is, per file preallocated past its size (Preallocate, as
	// fallocate with FALLOC_FL_KEEP_SIZE), the end of its room: the
	// bytes up to it are charged already, and writing them takes no more.
	alloc map[string]int64
}

// Wrap returns fs limited to budget bytes, counting the files fs already
// holds under root.
func Wrap(fs vfs.FS, root string, budget int64) *FS {
	f := &FS{FS: fs, alloc: map[string]int64{}}
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

// sizeOf returns the bytes the file at path holds: its size, or the end
// of its preallocated room past it.
func (f *FS) sizeOf(path string) int64 {
	if st, err := f.FS.Stat(path); err == nil && !st.IsDir() {
		return max(st.Size(), f.alloc[path])
	}
	return 0
}

// forget drops what f knows of the preallocations at path and under it.
func (f *FS) forget(path string) {
	for p := range f.alloc {
		if under(p, path) {
			delete(f.alloc, p)
		}
	}
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
	delete(f.alloc, name)
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
	f.move(oldname, newname)
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
	delete(f.alloc, name)
	return nil
}

func (f *FS) RemoveAll(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := treeSize(f.FS, name)
	for p, end := range f.alloc {
		if under(p, name) {
			n += max(end-f.sizeOfFile(p), 0)
		}
	}
	if err := f.FS.RemoveAll(name); err != nil {
		return err
	}
	f.used.Add(-n)
	f.forget(name)
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
	f.move(oldname, newname)
	return nil
}

// under reports whether path is dir or lies under it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/") || strings.HasPrefix(path, dir+string(os.PathSeparator))
}

// move carries the preallocation of oldname to newname, which replaced
// whatever newname was.
func (f *FS) move(oldname, newname string) {
	end, ok := f.alloc[oldname]
	delete(f.alloc, oldname)
	delete(f.alloc, newname)
	if ok {
		f.alloc[newname] = end
	}
}

// sizeOfFile returns the size of the file at path, without its
// preallocated room.
func (f *FS) sizeOfFile(path string) int64 {
	if st, err := f.FS.Stat(path); err == nil && !st.IsDir() {
		return st.Size()
	}
	return 0
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
// growth they cause past the file's size and preallocated room.
func (w *limitedFile) room(off int64, n int) (int, error) {
	st, err := w.File.Stat()
	if err != nil {
		return 0, err
	}
	size, end := max(st.Size(), w.fs.alloc[w.path]), off+int64(n)
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

// Preallocate reserves room for the file up to off+n without changing its
// size (fallocate with FALLOC_FL_KEEP_SIZE): it is charged now, or refused
// whole when it does not fit, and writing into it later takes no more.
func (w *limitedFile) Preallocate(off, n int64) error {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	st, err := w.File.Stat()
	if err != nil {
		return err
	}
	have, end := max(st.Size(), w.fs.alloc[w.path]), off+n
	if end <= have {
		return nil
	}
	if end-have > w.fs.budget.Load()-w.fs.used.Load() {
		return w.fs.noSpace("fallocate", w.path)
	}
	if err := w.File.Preallocate(off, n); err != nil {
		return err
	}
	w.fs.used.Add(end - have)
	w.fs.alloc[w.path] = end
	return nil
}

var _ io.WriterAt = (*limitedFile)(nil)
