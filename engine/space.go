package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A full disk is an expected state, never a failure. When a write of the
// log finds the disk full (or the metadata store cannot write a table),
// the engine enters the no-space state:
//
//   - The ballast file (Options.ReservedBytes, made at Open) is removed:
//     its room is the metadata store's, so that purge, retention, topic
//     deletion, commits and the store's own flushes keep working. Appends
//     never get it: from then on they are refused with ErrNoSpace before
//     any offset is handed out or byte written, so the room freed stays
//     the metadata's.
//   - Reads go on; so do purge, retention and deletion, which free room.
//   - The engine looks for room again (probeSpace) at most once per
//     spaceProbeInterval when an append comes, and at once when a cleanup
//     removed segment files. Once the file system has room for the ballast
//     and noSpaceResumeBytes more, the ballast is made again and appends
//     resume: no restart, no operator action beyond freeing space.
//
// A file system that cannot say how much room it has (vfs.ErrUnsupported)
// lets the next append try: the write itself is the probe.

// spaceProbeInterval is the least time between two looks for room by
// appenders in the no-space state (engine clock).
const spaceProbeInterval = time.Second

// noSpaceResumeBytes is the room, beyond the ballast, that the file
// system must have for appends to resume: a few staging chunks' worth,
// so that the state does not flap at every batch.
const noSpaceResumeBytes = 1 << 20

// spaceState is the engine's no-space state and its ballast.
type spaceState struct {
	full    atomic.Bool
	refused atomic.Uint64 // appends refused without a write in the state

	mu         sync.Mutex // serializes probes and ballast changes
	ballastSet bool
	since      time.Time // when the state began
	nextProbe  time.Time

	meta metaErrors
}

// SpaceStatus is the engine's view of its disk.
type SpaceStatus struct {
	// Full is true while appends are refused for lack of space.
	Full bool
	// Since is when the disk was found full (zero when not Full).
	Since time.Time
	// Reserved is true while the ballast holds its room.
	Reserved bool
	// MetadataErrors counts the metadata store's background errors (a
	// table it could not write: normally a full disk), since Open.
	MetadataErrors uint64
}

// Space returns whether the disk is full and what is reserved.
func (e *Engine) Space() SpaceStatus {
	s := &e.space
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SpaceStatus{Full: s.full.Load(), Reserved: s.ballastSet, MetadataErrors: s.meta.total.Load()}
	if st.Full {
		st.Since = s.since
	}
	return st
}

// noteDiskFull enters the no-space state (what found it says why) and
// hands the ballast's room to the metadata store.
func (e *Engine) noteDiskFull(what string, err error) {
	s := &e.space
	s.mu.Lock()
	defer s.mu.Unlock()
	now := e.opts.Now()
	if !s.full.Load() {
		s.since = now
		s.full.Store(true)
		e.opts.Logger.Warn("disk full: appends are refused until space is freed; reads, purge, retention and deletion go on",
			"dir", e.opts.Dir, "found_by", what, "err", err)
	}
	s.nextProbe = now.Add(spaceProbeInterval)
	e.releaseBallastLocked()
}

// appendRoomErr returns ErrNoSpace while the disk is full, after looking
// for room again if that is due.
func (e *Engine) appendRoomErr() error {
	s := &e.space
	if !s.full.Load() {
		return nil
	}
	if e.probeSpace(false) {
		return nil
	}
	s.refused.Add(1)
	return fmt.Errorf("%w: the disk is full since %s", ErrNoSpace, e.Space().Since.UTC().Format(time.RFC3339))
}

// probeSpace looks for room if the disk is full and a look is due (or
// force: a cleanup just removed files), and leaves the no-space state when
// there is enough. It reports whether appends may go on.
func (e *Engine) probeSpace(force bool) bool {
	s := &e.space
	if !s.full.Load() {
		return true
	}
	if !s.mu.TryLock() {
		return false // another caller is looking
	}
	defer s.mu.Unlock()
	now := e.opts.Now()
	if !s.full.Load() {
		return true
	}
	if !force && now.Before(s.nextProbe) {
		return false
	}
	s.nextProbe = now.Add(spaceProbeInterval)
	du, err := e.fs.GetDiskUsage(e.opts.Dir)
	switch {
	case errors.Is(err, vfs.ErrUnsupported):
		// Unknown: let the next write find out.
	case err != nil:
		return false
	case du.AvailBytes < uint64(max(e.opts.ReservedBytes, 0))+noSpaceResumeBytes:
		return false
	}
	if !e.createBallastLocked() {
		return false
	}
	s.full.Store(false)
	e.opts.Logger.Info("disk has room again: appends resume", "dir", e.opts.Dir, "full_for", now.Sub(s.since).String())
	s.since = time.Time{}
	return true
}

// ballastPath is the file that holds the reserved room.
func (e *Engine) ballastPath() string { return e.fs.PathJoin(e.opts.Dir, ballastName) }

// createBallastLocked makes sure the ballast exists with its full size,
// and reports whether it does (or none is wanted). A ballast that does not
// fit is removed again: half a reserve is no reserve.
func (e *Engine) createBallastLocked() bool {
	s := &e.space
	if e.opts.ReservedBytes <= 0 {
		return true
	}
	if s.ballastSet {
		return true
	}
	path := e.ballastPath()
	if st, err := e.fs.Stat(path); err == nil && st.Size() >= e.opts.ReservedBytes {
		s.ballastSet = true
		return true
	}
	f, err := e.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return false
	}
	chunk := make([]byte, min(e.opts.ReservedBytes, 1<<20))
	for left := e.opts.ReservedBytes; left > 0; left -= int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
			_ = f.Close()
			_ = e.fs.Remove(path)
			return false
		}
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = e.fs.Remove(path)
		return false
	}
	s.ballastSet = true
	return true
}

// releaseBallastLocked removes the ballast, giving its room to the
// metadata store.
func (e *Engine) releaseBallastLocked() {
	s := &e.space
	if e.opts.ReservedBytes <= 0 {
		return
	}
	if err := e.fs.Remove(e.ballastPath()); err != nil && !isNotExist(err) {
		e.opts.Logger.Warn("could not remove the ballast file", "err", err)
		return
	}
	if s.ballastSet {
		e.opts.Logger.Warn("disk full: released the reserved space for metadata, purge and retention", "bytes", e.opts.ReservedBytes)
	}
	s.ballastSet = false
}

// releaseBallastForOpen removes the ballast before the metadata store
// opens: replaying its log writes a table, which on a full disk needs the
// reserved room. The ballast is made again once recovery is done, if the
// disk has room for it.
func (e *Engine) releaseBallastForOpen() {
	s := &e.space
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.opts.ReservedBytes <= 0 {
		return
	}
	if err := e.fs.Remove(e.ballastPath()); err != nil && !isNotExist(err) {
		e.opts.Logger.Warn("could not remove the ballast file", "err", err)
	}
	s.ballastSet = false
}

// reserveAfterOpen makes the ballast again after recovery. A disk without
// room for it starts in the no-space state.
func (e *Engine) reserveAfterOpen() {
	s := &e.space
	s.mu.Lock()
	du, err := e.fs.GetDiskUsage(e.opts.Dir)
	short := err == nil && du.AvailBytes < uint64(max(e.opts.ReservedBytes, 0))+noSpaceResumeBytes
	ok := !short && e.createBallastLocked()
	s.mu.Unlock()
	if !ok {
		e.noteDiskFull("open", fmt.Errorf("no room for the %d reserved bytes and %d more", max(e.opts.ReservedBytes, 0), noSpaceResumeBytes))
	}
}
