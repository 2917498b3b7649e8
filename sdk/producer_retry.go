package sdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// The retry rules of a partition sender: how a failed batch is classified,
// and how the batches are settled and sent again once every batch in
// flight has answered.

func (s *partSender) handleReply(b *prodBatch, raw []byte, err error) {
	if err == nil {
		var rep wire.ProduceReply
		if err = decodeReply(raw, &rep); err == nil {
			b.acked, b.reply = true, rep
			s.widen()
			return
		}
	}
	s.recovering = true
	b.lastErr = err
	var we *wire.Error
	if !errors.As(err, &we) {
		// No reply: the stream or the connection failed.
		s.broken = true
		b.last = unknown
		if errors.Is(err, quic.ErrNotProcessed) {
			b.last = notSent
		}
		b.maybeWritten = b.maybeWritten || b.last == unknown
		return
	}
	nodeErr := &Error{Op: "produce", Topic: s.p.topic, Partition: int32(s.part), Status: we.Status, Message: we.Message}
	b.lastErr = nodeErr
	switch st := we.Status; {
	case st == wire.StatusTimeout:
		b.last, b.maybeWritten = unknown, true
	case st == wire.StatusOutOfOrderSequence && s.unresolvedBefore(b):
		// An earlier batch failed: this one found the gap it left.
		b.last = notSent
	case st == wire.StatusOutOfOrderSequence || st == wire.StatusUnknownProducer:
		b.last = freshIdentity
	case st == wire.StatusBusy:
		b.last = notSent
		s.busyAnswer(b, we.RetryAfter)
	case st == wire.StatusDuplicateSequence:
		// Appended long ago: the sequence stands, the offsets are lost.
		b.err = nodeErr
	case st.RetryClass() == wire.ClassRetry:
		b.last = notSent
	default:
		b.last, b.err, b.needsGap = notSent, nodeErr, true
	}
}

// unresolvedBefore reports whether a batch before b is not acknowledged.
func (s *partSender) unresolvedBefore(b *prodBatch) bool {
	for _, x := range s.unacked {
		if x == b {
			return false
		}
		if !x.acked {
			return true
		}
	}
	return false
}

// recover runs once every batch in flight has answered after a failure:
// it settles the batches (delivery timeouts, sequence gaps), takes a fresh
// identity where the node's answers require it, opens a new stream if the
// old one failed, and sends the unacknowledged batches again, in order.
func (s *partSender) recover(now time.Time) {
	s.settle(now)
	head := s.firstUnresolved()
	if s.p.cfg.idempotent && (s.needFresh || (head != nil && head.last == freshIdentity)) {
		id, err := s.p.backend.initProducer(s.p.abortCtx)
		if err != nil {
			if !IsRetryable(err) && !isAbort(err) {
				s.failUnresolved(err)
				return
			}
			s.retryLater(head, err)
			return
		}
		cause := any("a batch timed out")
		if head != nil {
			cause = head.lastErr
		}
		s.p.log.Info("producer re-initialized", "topic", s.p.topic, "partition", s.part, "producer", id.id, "cause", cause)
		s.id, s.nextSeq, s.needFresh = id, 0, false
		for _, b := range s.unacked {
			if !b.resolved() {
				s.renumber(b)
			}
		}
	}
	if head == nil {
		s.recovering = false
		return
	}
	if s.stream == nil || s.broken {
		s.abortStream()
		st, maxFrame, err := s.p.backend.openStream(s.p.abortCtx, maxInFlightBatches)
		if err != nil {
			if !IsRetryable(err) && !isAbort(err) {
				s.failUnresolved(err)
				return
			}
			s.retryLater(head, err)
			return
		}
		s.stream, s.broken, s.maxFrame = st, false, maxFrame
	}
	s.recovering = false
	for _, b := range s.unacked {
		if !b.resolved() && !s.send(b, now) {
			return
		}
	}
}

// retryLater counts an attempt and schedules the next one.
func (s *partSender) retryLater(head *prodBatch, err error) {
	attempts := 1
	if head != nil {
		head.attempts++
		attempts = head.attempts
		if head.lastErr == nil {
			head.lastErr = err
		}
	}
	backoff := s.p.cfg.retryBackoff << min(attempts-1, 16)
	s.retryAt = time.Now().Add(min(backoff, MaxRetryBackoff))
	s.recovering = true
}

// chainState is what settle knows, walking the batches in order, about
// how the node's sequence for this producer relates to ours.
type chainState uint8

const (
	chainIntact chainState = iota // our numbering matches the node's
	chainGap                      // a batch that was not appended was dropped: close the gap
	chainLost                     // a batch that may have been appended was dropped
)

// settle fails what waited past the delivery timeout and renumbers the
// batches behind a batch that failed for good. It relies on a batch being
// appended only after its predecessor: behind a batch that was not
// appended, no batch was.
func (s *partSender) settle(now time.Time) {
	limit := s.p.cfg.deliveryTimeout
	chain := chainIntact
	var gapSeq int32
	var lostCause error
	for _, b := range s.unacked {
		if b.acked {
			continue
		}
		if b.err != nil {
			if b.needsGap && chain == chainIntact {
				chain, gapSeq = chainGap, b.seq
			}
			b.needsGap = false
			continue
		}
		expired := now.Sub(b.recs[0].at) >= limit
		switch chain {
		case chainIntact:
			switch {
			case b.last == freshIdentity:
				// The node lost our numbering: everything unresolved goes
				// under a fresh identity, except what an earlier attempt
				// may have written.
				chain, lostCause = chainLost, b.lastErr
				if b.maybeWritten {
					b.err = fmt.Errorf("%w: %w", ErrUnknownOutcome, errOrNoReply(b.lastErr))
				}
			case !expired:
			case b.last == unknown:
				b.err = fmt.Errorf("%w: %w: %w", ErrDeliveryTimeout, ErrUnknownOutcome, errOrNoReply(b.lastErr))
				chain, lostCause = chainLost, b.err
			default:
				b.err = fmt.Errorf("%w: the record was not written: %w", ErrDeliveryTimeout, errOrNoReply(b.lastErr))
				chain, gapSeq = chainGap, b.seq
			}
		case chainGap:
			if expired {
				b.err = fmt.Errorf("%w: the record was not written: %w", ErrDeliveryTimeout, errOrNoReply(b.lastErr))
				continue
			}
			if s.p.cfg.idempotent {
				s.nextSeq = gapSeq
				s.renumber(b)
				gapSeq = s.nextSeq
			}
		case chainLost:
			if b.maybeWritten {
				b.err = fmt.Errorf("%w: an earlier batch of the partition failed: %w", ErrUnknownOutcome, lostCause)
			}
		}
	}
	switch chain {
	case chainGap:
		s.nextSeq = gapSeq
	case chainLost:
		// A fresh identity numbers from 0 again, and the node cannot
		// recognize a retry across identities: whatever may have been
		// written under the old one, before or after the batch that lost
		// the chain, is given up.
		s.needFresh = true
		for _, b := range s.unacked {
			if !b.resolved() && b.maybeWritten {
				b.err = fmt.Errorf("%w: %w", ErrUnknownOutcome, errOrNoReply(lostCause))
			}
		}
	}
	// Records still waiting for a batch expire too.
	s.mu.Lock()
	n := 0
	for n < len(s.queue) && now.Sub(s.queue[n].at) >= limit {
		n++
	}
	expired := append([]pendingRecord(nil), s.queue[:n]...)
	s.queue = s.queue[n:]
	s.mu.Unlock()
	if len(expired) > 0 {
		s.completeRecords(expired, nil, fmt.Errorf("%w: the record was not sent", ErrDeliveryTimeout))
	}
}

func errOrNoReply(err error) error {
	if err == nil {
		return errors.New("no reply")
	}
	return err
}

func (s *partSender) firstUnresolved() *prodBatch {
	for _, b := range s.unacked {
		if !b.resolved() {
			return b
		}
	}
	return nil
}

// failUnresolved fails every batch not yet resolved, and the queue, with
// a non-retryable err. Some of those batches may have been appended, so
// the next batch starts under a fresh identity.
func (s *partSender) failUnresolved(err error) {
	for _, b := range s.unacked {
		if !b.resolved() {
			b.err = err
		}
		b.needsGap = false
	}
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	s.completeRecords(q, nil, err)
	s.recovering = false
	s.needFresh = s.p.cfg.idempotent
}

// renumber gives b the next sequence numbers under the current identity.
// Only batches the node has definitely not appended are renumbered.
func (s *partSender) renumber(b *prodBatch) {
	b.frame = bytes.Clone(b.frame) // the old stream may still be writing the old bytes
	batch := b.frame[b.batchOff:]
	le := binary.LittleEndian
	le.PutUint64(batch[48:], s.id.id)
	le.PutUint32(batch[56:], s.id.epoch)
	le.PutUint32(batch[60:], uint32(s.nextSeq))
	le.PutUint32(batch[12:], record.BatchChecksum(batch))
	b.seq = s.nextSeq
	s.nextSeq = nextSequence(s.nextSeq, len(b.recs))
	b.last = notSent
}

// nextSequence is the sequence after n records from seq, wrapping at 2^31.
func nextSequence(seq int32, n int) int32 {
	return int32((int64(seq) + int64(n)) & (1<<31 - 1))
}

// busyAnswer paces the sender after the node answered b busy (it served
// nothing): the batches go again once the node's retry-after has passed,
// plus up to as much again of jitter, so that the producers it shed
// together do not come back together (without a hint, the retry backoff
// of b's attempts). Meanwhile the records that arrive wait in the queue
// and leave in fewer, larger batches; the window of batches in flight
// shrinks to one and widens by one with each batch the node accepts.
func (s *partSender) busyAnswer(b *prodBatch, hint time.Duration) {
	s.p.busy.Add(1)
	b.attempts++
	wait := hint
	if wait <= 0 {
		wait = min(s.p.cfg.retryBackoff<<min(b.attempts-1, 16), MaxRetryBackoff)
	}
	wait += rand.N(wait + 1)
	if at := time.Now().Add(wait); at.After(s.retryAt) {
		s.retryAt = at
	}
	s.paced = 1
	if f := s.p.cfg.onBusy; f != nil {
		f(hint)
	}
}

// widen grows the window of a sender paced by busy answers, by one batch
// per batch accepted, until it is whole again.
func (s *partSender) widen() {
	if s.paced > 0 {
		if s.paced++; s.paced >= maxInFlightBatches {
			s.paced = 0
		}
	}
}

// ProducerStats counts what a producer met.
type ProducerStats struct {
	// Busy is the produce requests the node answered busy: it served
	// nothing, and the producer sent them again after the node's
	// retry-after (docs/OPERATIONS.md, "Overload").
	Busy uint64
}

// Stats returns what p has met so far.
func (p *Producer) Stats() ProducerStats { return ProducerStats{Busy: p.busy.Load()} }

// WithOnBusy calls f each time the node answers one of the producer's
// requests busy, with the retry-after it hinted (0: none); the producer
// then waits that long, and sends again, by itself. f runs on the
// partition's sender: it must not block. A command line says "node
// busy, retrying" from it once.
//
// Default: nothing is called.
func WithOnBusy(f func(retryAfter time.Duration)) ProducerOption {
	return producerOption(func(c *producerConfig) { c.onBusy = f })
}
