package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ledgemq/ledge/fence"
)

// Topic is a named set of partitions with a random id fixed at creation.
type Topic struct {
	e     *Engine
	name  string
	id    fence.TopicID
	cfg   TopicConfig
	dir   string
	parts []*Partition

	// deleteMu orders metadata writes of the topic's keys with its
	// deletion: a write either commits before the deletion batch (which
	// then removes it) or fails with ErrTopicDeleted.
	deleteMu sync.RWMutex
	deleted  bool
}

// alive runs fn unless the topic is deleted, holding the deletion off
// while it runs.
func (t *Topic) alive(fn func() error) error {
	t.deleteMu.RLock()
	defer t.deleteMu.RUnlock()
	if t.deleted {
		return fmt.Errorf("%w: %q", ErrTopicDeleted, t.name)
	}
	return fn()
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// ID returns the topic's id: random, fixed at creation, different for a
// topic re-created under the same name.
func (t *Topic) ID() fence.TopicID { return t.id }

// Config returns the topic's configuration, defaults filled in.
func (t *Topic) Config() TopicConfig { return t.cfg }

// Partitions returns the number of partitions.
func (t *Topic) Partitions() int { return len(t.parts) }

// Partition returns partition i, or ErrUnknownPartition.
func (t *Topic) Partition(i int) (*Partition, error) {
	if i < 0 || i >= len(t.parts) {
		return nil, fmt.Errorf("%w: %d of topic %q (%d partitions)", ErrUnknownPartition, i, t.name, len(t.parts))
	}
	return t.parts[i], nil
}

// MaxTopicNameLen bounds topic names.
const MaxTopicNameLen = 249

func checkTopicName(name string) error {
	if name == "" || len(name) > MaxTopicNameLen || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w: topic name %q (1..%d bytes, no NUL)", ErrInvalidConfig, name, MaxTopicNameLen)
	}
	return nil
}

// CreateTopic creates a topic with a new random id. Its directories are
// created and fsynced before its metadata is committed (synced), so a topic
// that exists after a crash has its directories.
func (e *Engine) CreateTopic(name string, cfg TopicConfig) (*Topic, error) {
	if err := checkTopicName(name); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	if e.topics[name] != nil {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	var id fence.TopicID
	if _, err := io.ReadFull(e.opts.Rand, id[:]); err != nil {
		return nil, err
	}
	rec := topicRecord{name: name, id: id, cfg: cfg, created: e.opts.Now().UnixMilli()}
	t := e.newTopic(rec)
	for _, p := range t.parts {
		if err := e.fs.MkdirAll(p.dir, 0o755); err != nil {
			return nil, fmt.Errorf("engine: create %s: %w", p.dir, err)
		}
		if err := syncDir(e.fs, p.dir); err != nil {
			return nil, err
		}
	}
	if err := syncDir(e.fs, t.dir); err != nil {
		return nil, err
	}
	if err := syncDir(e.fs, e.fs.PathJoin(e.opts.Dir, topicsDirName)); err != nil {
		return nil, err
	}
	b := e.db.NewBatch()
	defer b.Close()
	_ = b.Set(topicNameKey(name), seal(kindTopicName, id[:]), nil)
	_ = b.Set(topicKey('C', id), seal(kindTopic, rec.encode()), nil)
	for _, p := range t.parts {
		p.durable = partState{
			epoch:   1,
			lineage: []fence.HistoryTransition{{Epoch: 1, Start: 0, Kind: fence.TransitionCreate}},
		}
		_ = b.Set(partKey('P', id, p.index), sealPartState(&p.durable), nil)
	}
	if err := e.commit(b, true); err != nil {
		// The directories stay: a failed commit may still be durable (the
		// store applies a batch before its sync fails), and the next Open
		// removes them if the topic is not.
		return nil, err
	}
	for _, p := range t.parts {
		p.epoch, p.lineage = 1, p.durable.lineage
		p.dur.prod = make(map[fence.ProducerID]*fence.ProducerState)
		p.startFlusher()
	}
	e.topics[name] = t
	e.opts.Logger.Info("topic created", "topic", name, "id", id.String(), "partitions", cfg.Partitions, "durability", cfg.Durability.String())
	return t, nil
}

func (e *Engine) newTopic(rec topicRecord) *Topic {
	cfg := rec.cfg
	t := &Topic{e: e, name: rec.name, id: rec.id, cfg: cfg,
		dir: e.fs.PathJoin(e.opts.Dir, topicsDirName, rec.id.String())}
	t.parts = make([]*Partition, cfg.Partitions)
	for i := range t.parts {
		t.parts[i] = &Partition{
			t: t, e: e, index: i, cfg: &t.cfg,
			dir:       e.fs.PathJoin(t.dir, fmt.Sprintf(partitionDirFm, i)),
			producers: make(map[fence.ProducerID]*fence.ProducerState),
			wake:      make(chan struct{}, 1),
		}
	}
	return t
}

// DeleteTopic deletes a topic, as a durable state machine:
//
//  1. Intent: one synced batch records a deletion intent for the topic id
//     and removes the name and every metadata key of the topic (state,
//     producer state, bookmarks, the owners' spaces). It is acknowledged
//     only once durable; if it fails, the topic is untouched in memory and
//     a restart finds it entirely present or entirely gone.
//  2. Pending work fails: appends, reads, bookmarks and metadata writes of
//     the topic fail with ErrTopicDeleted from then on, parked waiters on
//     Changed wake, and queued appends fail.
//  3. Cleanup: the topic's directory is removed, the topics directory
//     fsynced, and only then the intent dropped. If that fails, the intent
//     stays and the next Open finishes it before serving.
//
// A topic re-created under the same name has a new id: its files live in
// another directory and its keys contain the new id, so it shares nothing
// with this one, before or after a power loss.
func (e *Engine) DeleteTopic(name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	t := e.topics[name]
	if t == nil {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	b := e.db.NewBatch()
	defer b.Close()
	_ = b.Delete(topicNameKey(name), nil)
	_ = b.Set(topicKey('D', t.id), seal(kindDeletion, []byte(name)), nil)
	for _, k := range topicKeyPrefixes(t.id) {
		_ = b.DeleteRange(k, prefixEnd(k), nil)
	}
	t.deleteMu.Lock()
	err := e.commit(b, true)
	t.deleted = err == nil
	t.deleteMu.Unlock()
	if err != nil {
		return err
	}
	delete(e.topics, name)
	for _, p := range t.parts {
		p.stop(fmt.Errorf("%w: %q", ErrTopicDeleted, name))
	}
	if err := e.removeTopicDir(t.id); err != nil {
		e.opts.Logger.Warn("topic files not removed yet; the next start finishes", "topic", name, "err", err)
		return nil
	}
	e.opts.Logger.Info("topic deleted", "topic", name, "id", t.id.String())
	e.probeSpace(true) // the removal may have made room for appends
	return nil
}

// topicKeyPrefixes are the key prefixes holding everything of topic id.
func topicKeyPrefixes(id fence.TopicID) [][]byte {
	var ps [][]byte
	for _, tag := range []byte{'C', 'P', 'R', 'B'} {
		ps = append(ps, topicKey(tag, id))
	}
	for _, scope := range []byte{scopeTopic, scopePartition} {
		ps = append(ps, append([]byte{'S', scope}, id[:]...))
	}
	return ps
}

// removeTopicDir removes a deleted topic's files, fsyncs the parent
// directory, then drops the deletion intent.
func (e *Engine) removeTopicDir(id fence.TopicID) error {
	dir := e.fs.PathJoin(e.opts.Dir, topicsDirName, id.String())
	if err := e.fs.RemoveAll(dir); err != nil {
		return err
	}
	if err := syncDir(e.fs, e.fs.PathJoin(e.opts.Dir, topicsDirName)); err != nil {
		return err
	}
	b := e.db.NewBatch()
	defer b.Close()
	_ = b.Delete(topicKey('D', id), nil)
	return e.commit(b, false)
}

// finishDeletions completes topic deletions interrupted by a stop.
func (e *Engine) finishDeletions() error {
	p := []byte{'D'}
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return err
	}
	var ids []fence.TopicID
	for ok := it.First(); ok; ok = it.Next() {
		var id fence.TopicID
		if len(it.Key()) == 17 {
			copy(id[:], it.Key()[1:])
			ids = append(ids, id)
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, id := range ids {
		if err := e.removeTopicDir(id); err != nil {
			return fmt.Errorf("engine: finish deleting topic %s: %w", id, err)
		}
	}
	return nil
}

// loadTopics opens every live topic and recovers its partitions.
func (e *Engine) loadTopics(ctx context.Context) error {
	pre := []byte{'C'}
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixEnd(pre)})
	if err != nil {
		return err
	}
	var recs []topicRecord
	for ok := it.First(); ok; ok = it.Next() {
		p, err := openValue(it.Key(), it.Value(), kindTopic)
		if err != nil {
			_ = it.Close()
			return err
		}
		rec, err := decodeTopicRecord(p)
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("engine: topic record %x: %w", it.Key(), err)
		}
		recs = append(recs, rec)
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, rec := range recs {
		if _, err := rec.cfg.withDefaults(); err != nil {
			return fmt.Errorf("engine: topic %q: %w", rec.name, err)
		}
		t := e.newTopic(rec)
		e.topics[rec.name] = t // its recovered partitions are closed if the start stops
		for _, p := range t.parts {
			if err := context.Cause(ctx); err != nil {
				return fmt.Errorf("engine: open stopped during recovery: %w", err)
			}
			if err := p.recover(); err != nil {
				return fmt.Errorf("engine: topic %q partition %d: %w", rec.name, p.index, err)
			}
		}
	}
	return nil
}

// removeOrphanDirs removes topic directories of no live topic: what a
// power loss brings back of a deleted topic.
func (e *Engine) removeOrphanDirs() error {
	dir := e.fs.PathJoin(e.opts.Dir, topicsDirName)
	names, err := e.fs.List(dir)
	if err != nil {
		return err
	}
	live := make(map[string]bool, len(e.topics))
	for _, t := range e.topics {
		live[t.id.String()] = true
	}
	removed := false
	for _, n := range names {
		if !live[n] {
			if err := e.fs.RemoveAll(e.fs.PathJoin(dir, n)); err != nil {
				return err
			}
			removed = true
		}
	}
	if removed {
		return syncDir(e.fs, dir)
	}
	return nil
}

var errNoState = errors.New("engine: partition state missing from metadata")
