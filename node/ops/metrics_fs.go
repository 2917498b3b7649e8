package ops

import (
	"log/slog"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// WrapFS returns fs with every fsync timed into
// ledge_fsync_duration_seconds and every failed one counted in
// ledge_fsync_failures_total and logged (at error level, to log when not
// nil). Give the result to Config.FS: it covers the log segments, the
// metadata store and the directories alike. A nil fs is vfs.Default.
func (m *PromMetrics) WrapFS(fs vfs.FS, log *slog.Logger) vfs.FS {
	if fs == nil {
		fs = vfs.Default
	}
	return &meteredFS{FS: fs, m: m, log: log}
}

// meteredFS is a vfs.FS whose files time their syncs.
type meteredFS struct {
	vfs.FS
	m   *PromMetrics
	log *slog.Logger
}

// Unwrap implements vfs.FS.
func (f *meteredFS) Unwrap() vfs.FS { return f.FS }

func (f *meteredFS) wrap(file vfs.File, name, target string, err error) (vfs.File, error) {
	if err != nil {
		return file, err
	}
	return &meteredFile{File: file, fs: f, name: name, target: target}, nil
}

// fsyncTarget classifies a file by what the node keeps in it.
func fsyncTarget(name string) string {
	slashed := strings.ReplaceAll(name, "\\", "/")
	switch {
	case strings.Contains(slashed, "/meta/"):
		return "metadata"
	case strings.HasSuffix(slashed, ".log"):
		return "segment"
	}
	return "other"
}

// Create implements vfs.FS.
func (f *meteredFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return f.wrap(file, name, fsyncTarget(name), err)
}

// Open implements vfs.FS.
func (f *meteredFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.Open(name, opts...)
	return f.wrap(file, name, fsyncTarget(name), err)
}

// OpenReadWrite implements vfs.FS.
func (f *meteredFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	return f.wrap(file, name, fsyncTarget(name), err)
}

// OpenDir implements vfs.FS.
func (f *meteredFS) OpenDir(name string) (vfs.File, error) {
	file, err := f.FS.OpenDir(name)
	return f.wrap(file, name, "directory", err)
}

// ReuseForWrite implements vfs.FS.
func (f *meteredFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return f.wrap(file, newname, fsyncTarget(newname), err)
}

// meteredFile times the syncs of one file.
type meteredFile struct {
	vfs.File
	fs           *meteredFS
	name, target string
}

func (f *meteredFile) observe(start time.Time, err error) {
	f.fs.m.observeFsync(f.target, time.Since(start), err)
	if err != nil && f.fs.log != nil {
		f.fs.log.Error("fsync failed", "file", f.name, "err", err)
	}
}

// Sync implements vfs.File.
func (f *meteredFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	f.observe(start, err)
	return err
}

// SyncData implements vfs.File.
func (f *meteredFile) SyncData() error {
	start := time.Now()
	err := f.File.SyncData()
	f.observe(start, err)
	return err
}

// SyncTo implements vfs.File.
func (f *meteredFile) SyncTo(length int64) (bool, error) {
	start := time.Now()
	full, err := f.File.SyncTo(length)
	f.observe(start, err)
	return full, err
}
