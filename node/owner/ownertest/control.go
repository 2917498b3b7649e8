package ownertest

import (
	"context"

	"github.com/ledgemq/ledge/node/owner"
)

// What a test controls of the in-memory stores.

// SetSyncGate makes every later Sync call gate before it makes writes
// durable (nil: no gate); a test blocks or fails syncs with it.
func (m *Meta) SetSyncGate(gate func(ctx context.Context) error) {
	m.mu.Lock()
	m.syncGate = gate
	m.mu.Unlock()
}

// Syncs returns how many Sync calls completed.
func (m *Meta) Syncs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs
}

// Writes returns the ticket of the latest write (0: none yet).
func (m *Meta) Writes() owner.Ticket {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq
}

// SetMeta makes the log keep its bookmarks in m from now on (a restart's
// metadata).
func (l *Log) SetMeta(m *Meta) {
	l.mu.Lock()
	l.meta = m
	l.mu.Unlock()
}

// Reopen returns the log as a node restarted on m finds it: the same
// records and history, bookmarks and state in m.
func (l *Log) Reopen(m *Meta) *Log {
	r := NewLog(m, "")
	l.mu.Lock()
	defer l.mu.Unlock()
	r.key, r.state, r.lineage = l.key, l.state, append(r.lineage[:0], l.lineage...)
	return r
}

// SetRetentionWant sets the log start retention would set:
// EnforceRetention raises the start towards it, by whole batches, keeping
// every batch that reaches the floor.
func (l *Log) SetRetentionWant(start uint64) {
	l.mu.Lock()
	l.retentionWant = start
	l.mu.Unlock()
}

// SuspendNextRead makes the log's next read block at its "file read"
// until the returned gate is released.
func (l *Log) SuspendNextRead() *ReadGate {
	g := NewReadGate()
	l.mu.Lock()
	l.readGate = func(ctx context.Context) error {
		l.mu.Lock()
		l.readGate = nil
		l.mu.Unlock()
		return g.Wait(ctx)
	}
	l.mu.Unlock()
	return g
}

// ReadGate suspends one read at its file read: Arrived is closed when the
// read reaches it, and closing Release lets it go on.
type ReadGate struct {
	Arrived chan struct{}
	Release chan struct{}
}

// NewReadGate returns a gate neither arrived at nor released.
func NewReadGate() *ReadGate {
	return &ReadGate{Arrived: make(chan struct{}), Release: make(chan struct{})}
}

// Wait reports arrival and waits for the release (or ctx).
func (g *ReadGate) Wait(ctx context.Context) error {
	close(g.Arrived)
	select {
	case <-g.Release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SetFailed marks the partition failed (err) or healthy again (nil), as
// its State reports it.
func (l *Log) SetFailed(err error) {
	l.mu.Lock()
	l.state.Failed = err
	l.mu.Unlock()
}
