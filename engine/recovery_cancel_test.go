package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStopDuringRecovery: a node stopped (SIGTERM) while it recovers the
// partitions of an unclean stop. OpenContext returns the context's error
// at the next partition, recovering no more of them, with every file it
// opened closed and the directory unlocked; the next start recovers every
// partition and serves every acknowledged record, even if a power loss
// took what the stopped start had not synced.
func TestStopDuringRecovery(t *testing.T) {
	mem := vfs.NewCrashableMem()
	clock := newFakeClock()
	opts := testOptions(mem, clock)
	e := mustOpen(t, opts)
	type partition struct {
		topic string
		index int
	}
	acked := map[partition][]string{} // values, in order
	for _, name := range []string{"orders", "readings"} {
		top, err := e.CreateTopic(name, TopicConfig{Partitions: 3})
		if err != nil {
			t.Fatal(err)
		}
		for i := range top.Partitions() {
			p, _ := top.Partition(i)
			for b := range 3 {
				tag := fmt.Sprintf("%s-%d-%d", name, i, b)
				appendWait(t, p, makeBatch(t, tag, 10, clock.Now().UnixMilli()))
				for r := range 10 {
					acked[partition{name, i}] = append(acked[partition{name, i}], fmt.Sprintf("%s-%d", tag, r))
				}
			}
		}
	}
	// SIGKILL: the next start recovers every partition.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})

	// SIGTERM arrives while the second partition is being recovered.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	fs := &recoveryFS{FS: crashed, onListPartition: func(n int) {
		if n == 2 {
			stop()
		}
	}}
	opts.FS = fs
	e2, err := OpenContext(ctx, opts)
	if err == nil {
		e2.Close()
		t.Fatal("the start went on after its context was canceled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("start stopped during recovery: %v, want context.Canceled", err)
	}
	if n := fs.partitionsListed(); n != 2 {
		t.Errorf("%d of 6 partitions recovered after the stop during the second", n)
	}
	if open := fs.openFiles(); len(open) > 0 {
		t.Errorf("files left open after the stopped start: %v", open)
	}

	// The next start, on the same directory, recovers everything; so does
	// one after a power loss that took what the stopped start wrote and
	// had not synced.
	lost := crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	for _, disk := range []struct {
		name string
		fs   vfs.FS
	}{{"a restart", crashed}, {"a power loss and a restart", lost}} {
		opts.FS = disk.fs
		e3 := mustOpen(t, opts)
		for key, want := range acked {
			top, err := e3.Topic(key.topic)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := top.Partition(key.index)
			recs, _ := readAll(t, p, 0)
			var got []string
			for _, r := range recs {
				got = append(got, r.value)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s/%d after the stopped start and %s: %d records %v, %d acknowledged",
					key.topic, key.index, disk.name, len(got), got, len(want))
			}
		}
		if err := e3.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// recoveryFS is a file system that calls onListPartition when a partition
// directory (topics/ID/N) is listed, which recovery does once per
// partition, and knows which files are open.
type recoveryFS struct {
	vfs.FS
	onListPartition func(n int) // n: how many partitions were listed, this one included

	mu     sync.Mutex
	listed int
	open   map[*countedFile]string
}

func (fs *recoveryFS) List(dir string) ([]string, error) {
	if fs.PathBase(fs.PathDir(fs.PathDir(dir))) == topicsDirName {
		fs.mu.Lock()
		fs.listed++
		n := fs.listed
		fs.mu.Unlock()
		fs.onListPartition(n)
	}
	return fs.FS.List(dir)
}

func (fs *recoveryFS) partitionsListed() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.listed
}

// openFiles returns the names of the files open now.
func (fs *recoveryFS) openFiles() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var names []string
	for _, name := range fs.open {
		names = append(names, name)
	}
	return names
}

func (fs *recoveryFS) opened(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	c := &countedFile{File: f, fs: fs}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.open == nil {
		fs.open = map[*countedFile]string{}
	}
	fs.open[c] = name
	return c, nil
}

func (fs *recoveryFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.opened(f, name, err)
}

func (fs *recoveryFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.opened(f, name, err)
}

func (fs *recoveryFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.opened(f, name, err)
}

func (fs *recoveryFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.opened(f, name, err)
}

func (fs *recoveryFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.opened(f, newname, err)
}

// countedFile is a file recoveryFS knows is open until it is closed.
type countedFile struct {
	vfs.File
	fs *recoveryFS
}

func (f *countedFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	return f.File.Close()
}
