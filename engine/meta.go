package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ledgemq/ledge/fence"
)

// Metadata of the owners (consumer bookmarks, sessions, group state, state
// stores) goes through MetaBatch: related changes in one batch, applied in
// the order the owner commits them without waiting for an fsync
// (Commit), and made durable by a coalesced sync (SyncMeta) that the owner
// waits for outside its lock. One WAL sync covers every earlier commit, so
// many owners' commits share one fsync.

// metaFailure returns ErrMetadataFailed once a metadata write failed. Reads
// fail too from then on: the store applies a batch to its memory before
// its WAL sync, so after a failed sync it shows changes that are not
// durable and that the engine reported as failed (a deletion, a purge). A
// restart recovers what is durable.
func (e *Engine) metaFailure() error {
	if p := e.metaErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Bookmark is a consumer's committed position, stamped with the history
// epoch it was committed in. A bookmark of an older epoch means "at the
// new start offset" after a purge (see fence.ResolveBookmark), never "no
// committed offset".
type Bookmark struct {
	Offset  uint64
	History fence.HistoryEpoch
}

// MetaSeq orders metadata commits; SyncMeta waits until a commit is durable.
type MetaSeq uint64

// Space names a key space of owner metadata: node-wide, or scoped to a
// topic or a partition (removed with the topic, invisible to a topic
// re-created under the same name).
type Space struct {
	prefix []byte
	topic  *Topic // nil for a node-wide space
}

const (
	scopeNode      = 0
	scopeTopic     = 1
	scopePartition = 2
)

func checkSpaceName(name string) {
	if name == "" || strings.ContainsRune(name, 0) {
		panic(fmt.Sprintf("engine: invalid metadata space name %q", name))
	}
}

// NodeSpace returns the node-wide space called name (non-empty, no NUL).
func NodeSpace(name string) Space {
	checkSpaceName(name)
	return Space{prefix: append(append([]byte{'S', scopeNode}, name...), 0)}
}

// Space returns the topic-scoped space called name (non-empty, no NUL).
func (t *Topic) Space(name string) Space {
	checkSpaceName(name)
	p := append([]byte{'S', scopeTopic}, t.id[:]...)
	return Space{prefix: append(append(p, name...), 0), topic: t}
}

// Space returns the partition-scoped space called name (non-empty, no NUL).
func (p *Partition) Space(name string) Space {
	checkSpaceName(name)
	k := append([]byte{'S', scopePartition}, p.t.id[:]...)
	k = binary.BigEndian.AppendUint32(k, uint32(p.index))
	return Space{prefix: append(append(k, name...), 0), topic: p.t}
}

func (s Space) key(k []byte) []byte {
	return append(append(make([]byte, 0, len(s.prefix)+len(k)), s.prefix...), k...)
}

// MetaBatch is a set of metadata changes applied atomically. A batch that
// touches a topic deleted before it commits fails with ErrTopicDeleted and
// changes nothing.
type MetaBatch struct {
	e      *Engine
	b      *pebble.Batch
	topics []*Topic // the topics whose keys it touches
}

func (m *MetaBatch) touch(t *Topic) {
	if t != nil && !slices.Contains(m.topics, t) {
		m.topics = append(m.topics, t)
	}
}

// NewMetaBatch starts a batch of metadata changes.
func (e *Engine) NewMetaBatch() *MetaBatch {
	return &MetaBatch{e: e, b: e.db.NewBatch()}
}

// SetBookmark records consumer's position on p.
func (m *MetaBatch) SetBookmark(p *Partition, consumer string, b Bookmark) {
	m.touch(p.t)
	_ = m.b.Set(bookmarkKey(p.t.id, p.index, consumer), seal(kindBookmark, b.encode()), nil)
}

// DeleteBookmark removes consumer's position on p.
func (m *MetaBatch) DeleteBookmark(p *Partition, consumer string) {
	m.touch(p.t)
	_ = m.b.Delete(bookmarkKey(p.t.id, p.index, consumer), nil)
}

// Put sets key in space s to value (stored with magic, version, length
// and CRC32C, like every value of the engine).
func (m *MetaBatch) Put(s Space, key, value []byte) {
	m.touch(s.topic)
	_ = m.b.Set(s.key(key), seal(kindValue, value), nil)
}

// Delete removes key from space s.
func (m *MetaBatch) Delete(s Space, key []byte) {
	m.touch(s.topic)
	_ = m.b.Delete(s.key(key), nil)
}

// Len returns the number of changes in the batch.
func (m *MetaBatch) Len() int { return int(m.b.Count()) }

// Commit applies the batch without waiting for an fsync and returns its
// place in the commit order; SyncMeta makes it durable. The batch is
// consumed.
func (m *MetaBatch) Commit() (MetaSeq, error) {
	defer m.Close()
	// Hold off the deletion of every topic touched (in id order, so that
	// two batches never wait for each other) while checking and committing.
	slices.SortFunc(m.topics, func(a, b *Topic) int { return bytes.Compare(a.id[:], b.id[:]) })
	for _, t := range m.topics {
		t.deleteMu.RLock()
		defer t.deleteMu.RUnlock()
		if t.deleted {
			return 0, fmt.Errorf("%w: %q", ErrTopicDeleted, t.name)
		}
	}
	if err := m.e.commit(m.b, false); err != nil {
		return 0, err
	}
	return MetaSeq(m.e.metaSeq.Load()), nil
}

// CommitSync applies the batch and waits until it is durable.
func (m *MetaBatch) CommitSync(ctx context.Context) error {
	seq, err := m.Commit()
	if err != nil {
		return err
	}
	return m.e.SyncMeta(ctx, seq)
}

// Close discards the batch if it was not committed.
func (m *MetaBatch) Close() {
	if m.b != nil {
		_ = m.b.Close()
		m.b = nil
	}
}

// SyncMeta waits until the commit seq (and every earlier one) is durable.
// Concurrent callers share one WAL sync.
func (e *Engine) SyncMeta(ctx context.Context, seq MetaSeq) error {
	for {
		e.syncMu.Lock()
		if e.syncedSeq >= uint64(seq) {
			e.syncMu.Unlock()
			return nil
		}
		if p := e.metaErr.Load(); p != nil {
			e.syncMu.Unlock()
			return *p
		}
		if e.syncing {
			ch := e.syncDone
			e.syncMu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		e.syncing = true
		e.syncDone = make(chan struct{})
		target := e.metaSeq.Load()
		e.syncMu.Unlock()
		err := e.syncAll()
		e.syncMu.Lock()
		e.syncing = false
		if err == nil {
			e.syncedSeq = max(e.syncedSeq, target)
		}
		close(e.syncDone)
		e.syncMu.Unlock()
		if err != nil {
			return err
		}
	}
}

// Bookmark returns consumer's committed position on p, if any
// (ErrTopicDeleted once p's topic is deleted).
func (p *Partition) Bookmark(consumer string) (b Bookmark, ok bool, err error) {
	err = p.t.alive(func() error {
		b, ok, err = p.bookmark(consumer)
		return err
	})
	return b, ok, err
}

func (p *Partition) bookmark(consumer string) (Bookmark, bool, error) {
	if err := p.e.metaFailure(); err != nil {
		return Bookmark{}, false, err
	}
	key := bookmarkKey(p.t.id, p.index, consumer)
	v, closer, err := p.e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return Bookmark{}, false, nil
	}
	if err != nil {
		return Bookmark{}, false, err
	}
	defer closer.Close()
	pl, err := openValue(key, v, kindBookmark)
	if err != nil {
		return Bookmark{}, false, err
	}
	b, err := decodeBookmark(pl)
	return b, err == nil, err
}

// Bookmarks calls fn for every consumer with a bookmark on p.
func (p *Partition) Bookmarks(fn func(consumer string, b Bookmark) error) error {
	if err := p.e.metaFailure(); err != nil {
		return err
	}
	pre := partKey('B', p.t.id, p.index)
	it, err := p.e.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixEnd(pre)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		pl, err := openValue(it.Key(), it.Value(), kindBookmark)
		if err != nil {
			return err
		}
		b, err := decodeBookmark(pl)
		if err != nil {
			return err
		}
		if err := fn(string(it.Key()[len(pre):]), b); err != nil {
			return err
		}
	}
	return it.Error()
}

// GetMeta returns the value of key in space s.
func (e *Engine) GetMeta(s Space, key []byte) ([]byte, bool, error) {
	if err := e.metaFailure(); err != nil {
		return nil, false, err
	}
	k := s.key(key)
	v, closer, err := e.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	pl, err := openValue(k, v, kindValue)
	if err != nil {
		return nil, false, err
	}
	return append([]byte(nil), pl...), true, nil
}

// ScanMeta calls fn for every key of space s in key order. The slices are
// valid only during the call.
func (e *Engine) ScanMeta(s Space, fn func(key, value []byte) error) error {
	if err := e.metaFailure(); err != nil {
		return err
	}
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: s.prefix, UpperBound: prefixEnd(s.prefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		pl, err := openValue(it.Key(), it.Value(), kindValue)
		if err != nil {
			return err
		}
		if err := fn(it.Key()[len(s.prefix):], pl); err != nil {
			return err
		}
	}
	return it.Error()
}

// SetBookmark commits consumer's position on p without waiting for an
// fsync (a one-change MetaBatch); SyncMeta makes it durable.
func (p *Partition) SetBookmark(consumer string, b Bookmark) (MetaSeq, error) {
	m := p.e.NewMetaBatch()
	m.SetBookmark(p, consumer, b)
	return m.Commit()
}

// PutMeta commits one value without waiting for an fsync; SyncMeta makes
// it durable.
func (e *Engine) PutMeta(s Space, key, value []byte) (MetaSeq, error) {
	m := e.NewMetaBatch()
	m.Put(s, key, value)
	return m.Commit()
}
