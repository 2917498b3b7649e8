package engine

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/ledgemq/ledge/engine/internal/codec"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
)

// Producer state: per partition, per producer id, the epoch and a window of
// the latest batches (fence.ProducerState), kept so that the owner can
// answer a retried batch with its original offsets and fence a zombie.
//
// The live state is updated by Append (so in-flight batches count) and
// rolled back if their append fails. A durable copy follows the fsyncs of
// the log; it is snapshotted into the metadata store (with the offset it is
// valid as of) when a sealed segment is fsynced, at purge and at a clean
// shutdown.
// Recovery loads the snapshot and replays the batch headers of the log from
// that offset on. Purge keeps producer state: a purge that erased it would
// let a zombie producer in.

// prodRec is what a batch header says about its producer.
type prodRec struct {
	id         fence.ProducerID
	epoch      fence.ProducerEpoch
	seq, count int32
	base, last uint64
}

func prodRecOf(h record.BatchHeader) (prodRec, bool) {
	if h.ProducerID == 0 || h.BaseSequence < 0 {
		return prodRec{}, false
	}
	return prodRec{id: fence.ProducerID(h.ProducerID), epoch: fence.ProducerEpoch(h.ProducerEpoch),
		seq: h.BaseSequence, count: int32(h.RecordCount), base: h.BaseOffset, last: h.LastOffset()}, true
}

func applyProducer(m map[fence.ProducerID]*fence.ProducerState, r prodRec) {
	s := m[r.id]
	if s == nil {
		s = &fence.ProducerState{}
		m[r.id] = s
	}
	s.Record(fence.ProduceRequest{Producer: r.id, Epoch: r.epoch, BaseSequence: r.seq, Count: r.count}, r.base, r.last)
}

// producerUndo restores one producer's state as it was before an append.
// The zero value (producer id 0, which never appends as a producer)
// restores nothing. It is kept by value in the append's pending entry:
// an append of an idempotent producer allocates no undo record.
type producerUndo struct {
	id      fence.ProducerID
	prev    fence.ProducerState
	existed bool
}

func (p *Partition) applyProducerLocked(r prodRec) producerUndo {
	if r.seq < 0 {
		return producerUndo{}
	}
	u := producerUndo{id: r.id}
	if s := p.producers[r.id]; s != nil {
		u.prev, u.existed = *s, true
	}
	applyProducer(p.producers, r)
	return u
}

func (p *Partition) undoProducerLocked(u *producerUndo) {
	if u.id == 0 {
		return
	}
	if !u.existed {
		delete(p.producers, u.id)
		return
	}
	s := u.prev
	p.producers[u.id] = &s
}

// ProducerState returns the state of producer id on this partition
// (including batches appended but not yet durable), and whether it ever
// appended here.
func (p *Partition) ProducerState(id fence.ProducerID) (fence.ProducerState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.producers[id]
	if s == nil {
		return fence.ProducerState{}, false
	}
	return *s, true
}

// ProducerIDs returns the ids of the producers that appended here.
func (p *Partition) ProducerIDs() []fence.ProducerID {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := slices.Collect(maps.Keys(p.producers))
	slices.Sort(ids)
	return ids
}

// noteUnsyncedProdLocked records r, the producer record of a batch
// written but not yet fsynced, for the durable producer state.
//
// Under interval and none nothing but a sealed segment (or a purge, a
// close) may fsync for a long time, so the records of every batch of a
// segment could pile up: a slice that keeps doubling, each time copied
// whole while appends wait. Only the last ProducerWindow records of each
// producer can matter, so past a threshold the list is compacted to those.
func (p *Partition) noteUnsyncedProdLocked(r prodRec) {
	p.unsyncedProd = append(p.unsyncedProd, r)
	if len(p.unsyncedProd) < max(p.prodCompact, minProdCompact) {
		return
	}
	p.unsyncedProd = compactProdRecs(p.unsyncedProd)
	p.prodCompact = 2 * len(p.unsyncedProd)
}

// minProdCompact is the fewest unsynced producer records compacted.
const minProdCompact = 1024

// compactProdRecs keeps, in order, the last fence.ProducerWindow records
// of each producer. Applying them gives the state applying all would
// (the same epoch and window; only where the window's ring starts may
// differ, which neither its encoding nor its accessors show):
// ProducerState.Record keeps only the latest ProducerWindow batches, and
// starts afresh at a new epoch, which the first kept record does too if
// it is of another epoch than the state it is applied to.
func compactProdRecs(recs []prodRec) []prodRec {
	seen := make(map[fence.ProducerID]int)
	keep := make([]bool, len(recs))
	for i := len(recs) - 1; i >= 0; i-- {
		if id := recs[i].id; seen[id] < fence.ProducerWindow {
			seen[id]++
			keep[i] = true
		}
	}
	out := recs[:0]
	for i, r := range recs {
		if keep[i] {
			out = append(out, r)
		}
	}
	clear(recs[len(out):])
	return out
}

// producerSnapshot is the producer state after every batch below asOf.
type producerSnapshot struct {
	asOf  uint64
	state map[fence.ProducerID]*fence.ProducerState
}

func cloneProducers(m map[fence.ProducerID]*fence.ProducerState) map[fence.ProducerID]*fence.ProducerState {
	c := make(map[fence.ProducerID]*fence.ProducerState, len(m))
	for id, s := range m {
		v := *s
		c[id] = &v
	}
	return c
}

func (s *producerSnapshot) encode() ([]byte, error) {
	b := binary.AppendUvarint(nil, s.asOf)
	ids := slices.Sorted(maps.Keys(s.state))
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = binary.AppendUvarint(b, uint64(id))
		v, err := s.state[id].MarshalBinary()
		if err != nil {
			return nil, err
		}
		b = codec.AppendBytes(b, v)
	}
	return b, nil
}

func decodeProducerSnapshot(p []byte) (producerSnapshot, error) {
	r := codec.NewReader(p)
	s := producerSnapshot{asOf: r.Uvarint()}
	n := r.Count(2)
	s.state = make(map[fence.ProducerID]*fence.ProducerState, n)
	for i := 0; i < n && r.Err() == nil; i++ {
		id := fence.ProducerID(r.Uvarint())
		var st fence.ProducerState
		if err := st.UnmarshalBinary(r.Bytes()); err != nil && r.Err() == nil {
			return s, fmt.Errorf("producer %d: %w", id, err)
		}
		s.state[id] = &st
	}
	return s, r.Done()
}
