package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ledgemq/ledge/engine/internal/codec"
)

// Consumer state stores. A consumer (a named consumer or a group, by the
// key its owner gives it) keeps a keyed store per partition beside its
// bookmark. The store lives in the partition's metadata space "state":
//
//	'S' 2 id part "state" 0 uvarint(len(consumer)) consumer key   value
//
// so a topic deletion's range deletion of 'S' 2 id removes it with the
// topic, and a topic re-created under the same name (a new id) never sees
// it. The consumer name is length-prefixed so that no consumer's keys are a
// prefix range of another's.
//
// The only writes are CommitState (bookmark and changes in one batch) and
// DeleteConsumer (bookmark and every key in one batch): the state of a
// consumer never moves apart from its bookmark.

// stateSpace is the partition metadata space of the state stores.
const stateSpace = "state"

// StateChange is one change of a state store: a put of Value under Key, or
// the deletion of Key.
type StateChange struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// stateBase returns the full key prefix of consumer's store on p, with
// room for extra more bytes: p's partition space "state" (the layout of
// Partition.Space), then the length-prefixed consumer.
func (p *Partition) stateBase(consumer string, extra int) []byte {
	k := make([]byte, 0, 2+len(p.t.id)+4+len(stateSpace)+1+binary.MaxVarintLen64+len(consumer)+extra)
	k = append(append(k, 'S', scopePartition), p.t.id[:]...)
	k = binary.BigEndian.AppendUint32(k, uint32(p.index))
	k = append(append(k, stateSpace...), 0)
	k = binary.AppendUvarint(k, uint64(len(consumer)))
	return append(k, consumer...)
}

// CommitState commits consumer's bookmark and the changes to its state
// store on p in one batch, in the order given (a later change of a key
// wins), without waiting for an fsync; SyncMeta makes it durable, as for
// SetBookmark. Either the bookmark and every change are applied, or none
// (ErrTopicDeleted once p's topic is deleted, ErrMetadataFailed after a
// failed metadata write).
func (p *Partition) CommitState(consumer string, b Bookmark, changes []StateChange) (MetaSeq, error) {
	m := p.e.NewMetaBatch()
	m.SetBookmark(p, consumer, b)
	// The batch copies keys and values: one key buffer and one value
	// buffer serve every change, so a change costs no allocation of its
	// own.
	base := p.stateBase(consumer, 64)
	key := base
	var val []byte
	for i := range changes {
		c := &changes[i]
		key = append(key[:len(base)], c.Key...)
		if c.Delete {
			_ = m.b.Delete(key, nil)
		} else {
			val = codec.Seal(val[:0], kindValue, kindVersion, c.Value)
			_ = m.b.Set(key, val, nil)
		}
	}
	return m.Commit()
}

// DeleteConsumer removes consumer's bookmark and its whole state store on
// p in one batch, without waiting for an fsync; SyncMeta makes it durable.
func (p *Partition) DeleteConsumer(consumer string) (MetaSeq, error) {
	m := p.e.NewMetaBatch()
	m.DeleteBookmark(p, consumer)
	lo := p.stateBase(consumer, 0)
	_ = m.b.DeleteRange(lo, prefixEnd(lo), nil)
	return m.Commit()
}

// ScanState calls fn for every key of consumer's state store on p that
// starts with prefix, in key order, from a consistent view of the store
// (a pebble iterator: writes committed while the scan runs are not seen).
// The slices are valid only during the call. It fails with ErrTopicDeleted
// once p's topic is deleted.
func (p *Partition) ScanState(consumer string, prefix []byte, fn func(key, value []byte) error) error {
	return p.ScanStateFrom(consumer, prefix, nil, fn)
}

// ScanStateFrom is ScanState starting after key after (nil: from the
// first key with prefix).
func (p *Partition) ScanStateFrom(consumer string, prefix, after []byte, fn func(key, value []byte) error) error {
	return p.t.alive(func() error {
		if err := p.e.metaFailure(); err != nil {
			return err
		}
		base := p.stateBase(consumer, 0)
		lo := append(append([]byte(nil), base...), prefix...)
		hi := prefixEnd(lo) // never nil: base starts with 'S'
		if after != nil {
			// The smallest key above after: after followed by a zero byte.
			a := append(append(append([]byte(nil), base...), after...), 0)
			if string(a) > string(lo) {
				lo = a
			}
		}
		it, err := p.e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			v, err := openValue(it.Key(), it.Value(), kindValue)
			if err != nil {
				return fmt.Errorf("engine: state of %q: %w", consumer, err)
			}
			if err := fn(it.Key()[len(base):], v); err != nil {
				return err
			}
		}
		return it.Error()
	})
}
