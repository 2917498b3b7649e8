package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine/internal/codec"
)

// Engine is the durable log store of a node: topics of partitions on one
// vfs.FS, with their metadata in pebble on the same FS.
type Engine struct {
	opts  Options
	fs    vfs.FS
	db    *pebble.DB
	lock  io.Closer
	clock *jumpFreeClock

	readers  chan struct{} // reader pool slots
	tailUsed atomic.Int64
	chunks   sync.Pool // staging chunks (*[]byte) of the durability pipelines
	readBufs sync.Pool // read buffers (*[]byte) of readBufBytes
	bigBufs  bigBufs   // buffers of larger reads, given back by Release

	metaSeq   atomic.Uint64 // commits applied
	metaErr   atomic.Pointer[error]
	syncMu    sync.Mutex
	syncedSeq uint64
	syncing   bool
	syncDone  chan struct{}
	space     spaceState // the no-space state and the ballast (space.go)

	mu     sync.Mutex
	topics map[string]*Topic
	closed bool
}

// Directory layout under Options.Dir:
//
//	LOCK                       held while the engine is open
//	meta/                      pebble: all metadata
//	ballast                    reserved space, released when the disk fills
//	topics/<topic id>/<partition>/<base offset>.log   segments
//	topics/<topic id>/<partition>/<base offset>.idx   their sealed indexes
//
// Directories are named by topic id, not name, so a topic re-created under
// the same name never sees a file of its predecessor.
const (
	metaDirName    = "meta"
	topicsDirName  = "topics"
	ballastName    = "ballast"
	lockName       = "LOCK"
	segmentExt     = ".log"
	indexExt       = ".idx"
	temporaryExt   = ".tmp"
	partitionDirFm = "%d"
)

// Open opens (creating if needed) the engine in opts.Dir and recovers
// every partition: it finds the end of each log by checksums, cuts a torn
// tail after the last durable checkpoint, rebuilds missing or stale
// indexes, finishes interrupted topic deletions and purges, and continues
// numbering above the offsets that might have been handed out before an
// unclean stop (bumping the history epoch where readers could have seen
// lost records). A partition whose durable part is corrupt opens in a
// failed state (PartitionState.Failed is a *CorruptLogError) and is not
// served; the others are.
func Open(opts Options) (*Engine, error) {
	return OpenContext(context.Background(), opts)
}

// OpenContext is Open that gives up, with ctx's error, once ctx is done:
// between the recoveries of two partitions, and while the metadata store
// waits for room to replay its log (a disk full to its last byte, ballast
// included). A node stopped during its start-up stops at once.
func OpenContext(ctx context.Context, opts Options) (*Engine, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	fs := opts.FS
	if err := fs.MkdirAll(fs.PathJoin(opts.Dir, topicsDirName), 0o755); err != nil {
		return nil, fmt.Errorf("engine: create %s: %w", opts.Dir, err)
	}
	lock, err := fs.Lock(fs.PathJoin(opts.Dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("engine: lock %s (is another node running on it?): %w", opts.Dir, err)
	}
	e := &Engine{
		opts:    opts,
		fs:      fs,
		lock:    lock,
		clock:   &jumpFreeClock{wall: opts.Now, maxStep: opts.MaxClockStep.Milliseconds()},
		readers: make(chan struct{}, opts.ReaderPoolSize),
		topics:  make(map[string]*Topic),
	}
	e.space.meta.closing = make(chan struct{})
	if err := e.open(ctx); err != nil {
		e.closeRecovered()
		e.shutdown()
		return nil, err
	}
	return e, nil
}

// closeRecovered releases the segment files of the partitions a start
// recovered before it gave up (a stop signal, a partition it could not
// recover): a process that goes on, as a test does, keeps no file open.
func (e *Engine) closeRecovered() {
	for _, t := range e.topics {
		for _, p := range t.parts {
			p.closeSegments()
		}
	}
}

func (e *Engine) open(ctx context.Context) error {
	po := &pebble.Options{FS: e.fs, Logger: newMetaLogger(e.opts.Logger)}
	po.EventListener = &pebble.EventListener{BackgroundError: e.backgroundError}
	if e.opts.Pebble != nil {
		e.opts.Pebble(po)
	}
	e.releaseBallastForOpen()
	db, err := e.openMetaStore(ctx, po)
	if err != nil {
		return err
	}
	// pebble.Open flushes what it replays from its WAL into a new, fsynced
	// table before it returns: bytes a failed fsync left only in the page
	// cache are durable before recovery acts on them (removes files,
	// continues numbering).
	e.db = db
	// The directories were created (by MkdirAll and pebble) without their
	// entries being made durable: sync the data directory and its parent.
	for _, d := range []string{e.fs.PathDir(e.opts.Dir), e.opts.Dir} {
		if err := syncDir(e.fs, d); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	if err := e.checkSchema(); err != nil {
		return err
	}
	if err := e.loadClock(); err != nil {
		return err
	}
	if err := e.finishDeletions(); err != nil {
		return err
	}
	if err := e.loadTopics(ctx); err != nil {
		return err
	}
	if err := e.removeOrphanDirs(); err != nil {
		return err
	}
	// Recovery wrote every partition's new state without syncing; one sync
	// makes all of it durable before any offset is handed out.
	if err := e.syncAll(); err != nil {
		return err
	}
	e.reserveAfterOpen()
	for _, t := range e.topics {
		for _, p := range t.parts {
			p.startFlusher()
		}
	}
	return nil
}

func (e *Engine) checkSchema() error {
	v, closer, err := e.db.Get(schemaKey)
	if errors.Is(err, pebble.ErrNotFound) {
		b := e.db.NewBatch()
		defer b.Close()
		_ = b.Set(schemaKey, seal(kindSchema, []byte{schemaVersion}), nil)
		return e.commit(b, true)
	}
	if err != nil {
		return fmt.Errorf("engine: read schema: %w", err)
	}
	defer closer.Close()
	p, _, err := codec.Open(v, kindSchema, kindVersion)
	switch {
	case errors.Is(err, codec.ErrNewerVersion):
		return fmt.Errorf("%w: metadata schema record: %v", ErrUnsupportedFormat, err)
	case err != nil || len(p) != 1:
		return fmt.Errorf("engine: metadata schema record is corrupt: %v", err)
	case p[0] > schemaVersion:
		return fmt.Errorf("%w: metadata schema version %d, this build reads up to %d", ErrUnsupportedFormat, p[0], schemaVersion)
	}
	return nil
}

func (e *Engine) loadClock() error {
	now := e.opts.Now()
	v, closer, err := e.db.Get([]byte{'K'})
	if errors.Is(err, pebble.ErrNotFound) {
		e.clock.lastWall, e.clock.eff = now.UnixMilli(), now.UnixMilli()
		return nil
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	p, err := openValue([]byte{'K'}, v, kindClock)
	if err != nil {
		return err
	}
	if err := e.clock.decode(p); err != nil {
		return fmt.Errorf("engine: clock record: %w", err)
	}
	e.clock.observe(now)
	return nil
}

// Close shuts the engine down cleanly: appends are refused, everything
// queued is written and fsynced, indexes are written, and each partition's
// state is recorded as clean, so that a restart neither skips offsets nor
// bumps a history epoch.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.closed = true
	e.space.meta.stopPacing()
	topics := slices.Collect(maps.Values(e.topics))
	e.mu.Unlock()
	var errs []error
	for _, t := range topics {
		for _, p := range t.parts {
			if err := p.closeClean(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	b := e.db.NewBatch()
	_ = b.Set([]byte{'K'}, seal(kindClock, e.clock.encode()), nil)
	if err := e.commit(b, true); err != nil {
		errs = append(errs, err)
	}
	b.Close()
	e.shutdown()
	return errors.Join(errs...)
}

func (e *Engine) shutdown() {
	if e.db != nil {
		_ = e.db.Close()
		e.db = nil
	}
	if e.lock != nil {
		_ = e.lock.Close()
		e.lock = nil
	}
}

// Topic returns the live topic named name, or ErrUnknownTopic.
func (e *Engine) Topic(name string) (*Topic, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	t := e.topics[name]
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return t, nil
}

// Topics returns the live topics, sorted by name.
func (e *Engine) Topics() []*Topic {
	e.mu.Lock()
	defer e.mu.Unlock()
	ts := slices.Collect(maps.Values(e.topics))
	slices.SortFunc(ts, func(a, b *Topic) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return ts
}

// commit applies a metadata batch. A failure of the metadata store (a
// failed WAL write or sync, which pebble treats as fatal) is caught and
// turns every later commit into ErrMetadataFailed: an fsync is never
// retried, the node must restart.
func (e *Engine) commit(b *pebble.Batch, sync bool) (err error) {
	if p := e.metaErr.Load(); p != nil {
		return *p
	}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(metaFatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%w: %s", ErrMetadataFailed, string(f))
			e.metaErr.CompareAndSwap(nil, &err)
		}
	}()
	wo := pebble.NoSync
	if sync {
		wo = pebble.Sync
	}
	if err := e.db.Apply(b, wo); err != nil {
		return fmt.Errorf("%w: %v", ErrMetadataFailed, err)
	}
	e.metaSeq.Add(1)
	return nil
}

// syncAll makes every metadata commit so far durable with one WAL sync.
func (e *Engine) syncAll() (err error) {
	if p := e.metaErr.Load(); p != nil {
		return *p
	}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(metaFatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%w: %s", ErrMetadataFailed, string(f))
			e.metaErr.CompareAndSwap(nil, &err)
		}
	}()
	if err := e.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("%w: %v", ErrMetadataFailed, err)
	}
	return nil
}
