package fence

import (
	"encoding/binary"
	"fmt"
)

// ProducerWindow is how many of a producer's latest batches per partition
// are remembered, so that a retry of any of them is answered with its
// original offsets. A producer keeps at most this many batches in flight
// per partition.
const ProducerWindow = 8

// maxSequence is where batch sequences wrap around to 0.
const maxSequence = 1<<31 - 1

// Registration is the node-wide record of a producer id: the epoch of its
// newest incarnation. Known is false for an id never initialized here.
type Registration struct {
	Epoch ProducerEpoch
	Known bool
}

// ProduceRequest is what a batch header says about its producer.
type ProduceRequest struct {
	Producer     ProducerID
	Epoch        ProducerEpoch
	BaseSequence int32 // -1: no sequence
	Count        int32 // records in the batch, > 0
}

// LastSequence returns the sequence of the batch's last record.
func (r ProduceRequest) LastSequence() int32 {
	return int32((int64(r.BaseSequence) + int64(r.Count) - 1) & maxSequence)
}

// SequencedBatch remembers one appended batch of a producer.
type SequencedBatch struct {
	FirstSeq, LastSeq int32
	Base, Last        uint64 // offsets assigned to its first and last record
}

// ProduceVerdict is the decision on a batch that passed the checks.
type ProduceVerdict struct {
	// Duplicate: the batch was appended before; answer with Base and Last
	// and do not append it again.
	Duplicate  bool
	Base, Last uint64
}

// ProducerState is one producer's state on one partition: the epoch of its
// latest batches and a window of them. The owner keeps it (persisted, never
// erased by purge) and updates it with Record after each append. The zero
// value is a producer that never appended here.
type ProducerState struct {
	Epoch   ProducerEpoch
	n       uint8 // batches held
	head    uint8 // index of the newest
	batches [ProducerWindow]SequencedBatch
}

// Len returns how many batches the window holds.
func (s *ProducerState) Len() int { return int(s.n) }

// Batch returns the i-th newest batch (0 = newest).
func (s *ProducerState) Batch(i int) SequencedBatch {
	return s.batches[(int(s.head)-i+ProducerWindow)%ProducerWindow]
}

// Record notes that r was appended at offsets [base, last]. A batch of a
// newer epoch starts the window afresh.
func (s *ProducerState) Record(r ProduceRequest, base, last uint64) {
	if s.Epoch != r.Epoch || s.n == 0 {
		s.Epoch, s.n, s.head = r.Epoch, 0, ProducerWindow-1
	}
	s.head = (s.head + 1) % ProducerWindow
	s.batches[s.head] = SequencedBatch{FirstSeq: r.BaseSequence, LastSeq: r.LastSequence(), Base: base, Last: last}
	if s.n < ProducerWindow {
		s.n++
	}
}

// Forget drops the remembered batches whose offsets reach end or beyond,
// newest first: after a lossy recovery they no longer exist, and a retry of
// one must be appended again rather than answered with lost offsets.
func (s *ProducerState) Forget(end uint64) {
	for s.n > 0 && s.batches[s.head].Last >= end {
		s.head = (s.head + ProducerWindow - 1) % ProducerWindow
		s.n--
	}
}

// seqAhead returns how far a is ahead of b in the wrapping sequence space
// (0 <= result <= maxSequence).
func seqAhead(a, b int32) uint32 { return (uint32(a) - uint32(b)) & maxSequence }

// CheckIncarnation decides whether (id, epoch) is the producer's current
// incarnation by the node-wide registration reg: the rule every batch of
// an idempotent producer is checked by, and the one a re-initialization
// must pass. An epoch below the registered one is fenced (a newer
// incarnation exists); an id never registered, or an epoch above the
// registered one, is unknown.
func CheckIncarnation(reg Registration, id ProducerID, epoch ProducerEpoch) error {
	switch {
	case !reg.Known:
		return reject(CodeUnknownProducer, Partition{}, "producer %d is not registered", id)
	case epoch < reg.Epoch:
		return reject(CodeFencedProducer, Partition{}, "producer %d epoch %d was fenced by epoch %d", id, epoch, reg.Epoch)
	case epoch > reg.Epoch:
		return reject(CodeUnknownProducer, Partition{}, "producer %d epoch %d is ahead of the registered epoch %d", id, epoch, reg.Epoch)
	}
	return nil
}

// CheckProduce decides an append from an idempotent producer. reg is the
// node-wide registration of r.Producer; s its state on this partition (nil
// if it never appended here). It accepts the next sequence (a zero verdict),
// answers a retry of a remembered batch with its original offsets, and
// refuses a gap (ErrOutOfOrderSequence), a batch of an older incarnation
// (ErrFencedProducer) and an unregistered id or epoch (ErrUnknownProducer).
// A batch without a producer (id 0) is always accepted.
func CheckProduce(reg Registration, s *ProducerState, r ProduceRequest) (ProduceVerdict, error) {
	if r.Producer == 0 {
		return ProduceVerdict{}, nil
	}
	if err := CheckIncarnation(reg, r.Producer, r.Epoch); err != nil {
		return ProduceVerdict{}, err
	}
	switch {
	case s != nil && r.Epoch < s.Epoch:
		return ProduceVerdict{}, reject(CodeFencedProducer, Partition{}, "producer %d epoch %d was fenced by epoch %d", r.Producer, r.Epoch, s.Epoch)
	case r.BaseSequence < 0 || r.Count <= 0:
		return ProduceVerdict{}, reject(CodeOutOfOrderSequence, Partition{}, "producer %d sent a batch without a sequence", r.Producer)
	}
	if s == nil || s.n == 0 || s.Epoch != r.Epoch {
		if r.BaseSequence != 0 {
			return ProduceVerdict{}, reject(CodeOutOfOrderSequence, Partition{}, "producer %d epoch %d must start at sequence 0, got %d", r.Producer, r.Epoch, r.BaseSequence)
		}
		return ProduceVerdict{}, nil
	}
	newest := s.batches[s.head]
	expected := int32((uint32(newest.LastSeq) + 1) & maxSequence)
	ahead := seqAhead(r.BaseSequence, expected)
	if ahead == 0 {
		return ProduceVerdict{}, nil
	}
	if ahead < 1<<30 {
		return ProduceVerdict{}, reject(CodeOutOfOrderSequence, Partition{}, "producer %d expected sequence %d, got %d", r.Producer, expected, r.BaseSequence)
	}
	last := r.LastSequence()
	for i := 0; i < int(s.n); i++ {
		b := s.Batch(i)
		if b.FirstSeq == r.BaseSequence && b.LastSeq == last {
			return ProduceVerdict{Duplicate: true, Base: b.Base, Last: b.Last}, nil
		}
	}
	oldest := s.Batch(int(s.n) - 1)
	if d := seqAhead(oldest.FirstSeq, last); d != 0 && d < 1<<30 {
		return ProduceVerdict{}, reject(CodeDuplicateSequence, Partition{}, "producer %d sequence %d was appended before the oldest remembered batch (%d)", r.Producer, r.BaseSequence, oldest.FirstSeq)
	}
	return ProduceVerdict{}, reject(CodeOutOfOrderSequence, Partition{}, "producer %d sequences [%d,%d] do not match an appended batch", r.Producer, r.BaseSequence, last)
}

const (
	producerStateVersion = 1
	batchRecordSize      = 4 + 4 + 8 + 8
)

// AppendBinary appends the state's encoding (version, epoch, count, then
// the batches oldest first) for the owner to persist.
func (s *ProducerState) AppendBinary(b []byte) ([]byte, error) {
	le := binary.LittleEndian
	b = append(b, producerStateVersion)
	b = le.AppendUint32(b, uint32(s.Epoch))
	b = append(b, s.n)
	for i := int(s.n) - 1; i >= 0; i-- {
		r := s.Batch(i)
		b = le.AppendUint32(b, uint32(r.FirstSeq))
		b = le.AppendUint32(b, uint32(r.LastSeq))
		b = le.AppendUint64(b, r.Base)
		b = le.AppendUint64(b, r.Last)
	}
	return b, nil
}

// MarshalBinary returns the state's encoding.
func (s *ProducerState) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, 6+int(s.n)*batchRecordSize))
}

// UnmarshalBinary decodes what MarshalBinary wrote.
func (s *ProducerState) UnmarshalBinary(b []byte) error {
	if len(b) < 6 || b[0] != producerStateVersion {
		return fmt.Errorf("fence: producer state: bad header (%d bytes)", len(b))
	}
	le := binary.LittleEndian
	n := int(b[5])
	if n > ProducerWindow || len(b) != 6+n*batchRecordSize {
		return fmt.Errorf("fence: producer state: %d batches in %d bytes", n, len(b))
	}
	var d ProducerState
	d.Epoch = ProducerEpoch(le.Uint32(b[1:]))
	d.head = ProducerWindow - 1
	for i := 0; i < n; i++ {
		r := b[6+i*batchRecordSize:]
		d.head = (d.head + 1) % ProducerWindow
		d.batches[d.head] = SequencedBatch{
			FirstSeq: int32(le.Uint32(r)), LastSeq: int32(le.Uint32(r[4:])),
			Base: le.Uint64(r[8:]), Last: le.Uint64(r[16:]),
		}
	}
	d.n = uint8(n)
	*s = d
	return nil
}
