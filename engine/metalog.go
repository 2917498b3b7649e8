package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The metadata store (pebble) retries a flush or compaction that failed
// at once, with no pause: on a full disk that is a loop writing a table,
// failing and logging, as fast as the CPU goes (measured before this
// change: about 600,000 error lines, 101 MB of log, in 3.5 minutes of a
// restart on a full disk, which never became ready). Its EventListener's
// BackgroundError runs in that loop, on the goroutine that retries, so
// the engine paces the loop there: each error in a run of them waits
// twice as long as the one before, from metaBackoffMin up to
// metaBackoffMax, and the log gets the first error of a run, then at most
// one line per metaLogEvery saying how many came since. A disk-full error
// also enters the no-space state (space.go), whose ballast gives the
// store the room to finish.
const (
	metaBackoffMin = 10 * time.Millisecond
	metaBackoffMax = 500 * time.Millisecond
	metaLogEvery   = 10 * time.Second
	// metaRunGap is the quiet time after which an error starts a new run.
	metaRunGap = 5 * time.Second
)

// metaErrors paces and logs the metadata store's background errors.
type metaErrors struct {
	total atomic.Uint64

	mu         sync.Mutex
	last       time.Time // of the last error (wall clock)
	backoff    time.Duration
	logged     time.Time // of the last line logged
	suppressed int       // errors not logged since
	closing    chan struct{}
}

// backgroundError is the metadata store's EventListener.BackgroundError.
func (e *Engine) backgroundError(err error) {
	m := &e.space.meta
	m.total.Add(1)
	if IsDiskFull(err) {
		e.noteDiskFull("metadata", err)
	}
	now := time.Now()
	m.mu.Lock()
	if now.Sub(m.last) > metaRunGap {
		m.backoff = 0
		m.logged = time.Time{}
	}
	m.last = now
	m.backoff = min(max(2*m.backoff, metaBackoffMin), metaBackoffMax)
	wait := m.backoff
	line := m.logged.IsZero() || now.Sub(m.logged) >= metaLogEvery
	suppressed := m.suppressed
	if line {
		m.logged, m.suppressed = now, 0
	} else {
		m.suppressed++
	}
	closing := m.closing
	m.mu.Unlock()
	if line {
		args := []any{"err", err, "retry_in", wait.String()}
		if suppressed > 0 {
			args = append(args, "repeated", suppressed)
		}
		e.opts.Logger.Error("metadata: background error; retrying", args...)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-closing:
	}
}

// stopPacing ends the pauses of the metadata store's retries: the store is
// closing, and its close waits for the retry in progress.
func (m *metaErrors) stopPacing() {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.closing:
	default:
		close(m.closing)
	}
}

// openMetaStore opens the metadata store. Its Open replays the log into a
// table; on a disk with no room at all it retries (paced) until room is
// freed, and cannot be stopped. If ctx is done first, the open is left to
// itself (a process stopping exits; should the store ever open, it is
// closed) and OpenContext returns.
func (e *Engine) openMetaStore(ctx context.Context, po *pebble.Options) (*pebble.DB, error) {
	type opened struct {
		db  *pebble.DB
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		db, err := pebble.Open(e.fs.PathJoin(e.opts.Dir, metaDirName), po)
		ch <- opened{db, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, fmt.Errorf("engine: open metadata: %w", o.err)
		}
		return o.db, nil
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.db != nil {
				_ = o.db.Close()
			}
		}()
		return nil, fmt.Errorf("engine: open stopped while the metadata store waited for room on the disk: %w", context.Cause(ctx))
	}
}

// metaFatal is what the metadata store's fatal errors panic with, so that
// the engine can turn them into ErrMetadataFailed instead of an exit.
type metaFatal string

// metaLogger is the metadata store's logger. Its error lines are limited
// like background errors: the first of a run, then one per metaLogEvery.
type metaLogger struct {
	l  *slog.Logger
	mu *sync.Mutex
	rl *lineLimit
}

type lineLimit struct {
	logged     time.Time
	suppressed int
}

func newMetaLogger(l *slog.Logger) metaLogger {
	return metaLogger{l: l, mu: new(sync.Mutex), rl: new(lineLimit)}
}

func (m metaLogger) Infof(format string, args ...any) {
	m.l.Debug("metadata: " + fmt.Sprintf(format, args...))
}

func (m metaLogger) Errorf(format string, args ...any) {
	now := time.Now()
	m.mu.Lock()
	if !m.rl.logged.IsZero() && now.Sub(m.rl.logged) < metaLogEvery {
		m.rl.suppressed++
		m.mu.Unlock()
		return
	}
	suppressed := m.rl.suppressed
	m.rl.logged, m.rl.suppressed = now, 0
	m.mu.Unlock()
	if suppressed > 0 {
		m.l.Error("metadata: "+fmt.Sprintf(format, args...), "repeated", suppressed)
		return
	}
	m.l.Error("metadata: " + fmt.Sprintf(format, args...))
}

func (m metaLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	m.l.Error("metadata store failed; restart the node", "err", msg)
	panic(metaFatal(msg))
}
