package sdk

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// pendingRecord is a record accepted by Produce and not yet completed.
type pendingRecord struct {
	rec  *Record
	cb   func(*Record, error)
	at   time.Time // accepted: the delivery timeout counts from here
	size int
}

// outcome is what the last attempt of a batch established.
type outcome uint8

const (
	// notSent: never sent, or its last attempt was definitely not appended
	// (a refusal, or a request the node never read).
	notSent outcome = iota
	// unknown: the batch may or may not have been appended (a timeout, a
	// connection lost with the request on the wire).
	unknown
	// freshIdentity: the node does not know the producer or disagrees on
	// the sequence: not appended, and resending needs a new identity.
	freshIdentity
)

// prodBatch is one batch of a partition, from its first send until its
// records are completed.
type prodBatch struct {
	recs     []pendingRecord
	frame    []byte // the whole produce request frame
	batchOff int    // where the record batch starts in frame
	seq      int32  // base sequence
	onWire   bool   // sent on the current stream, reply pending
	sentAt   time.Time
	attempts int
	last     outcome
	lastErr  error
	everSent bool
	sends    int  // times the frame was given to a stream
	probed   bool // the node was probed for this send's overdue reply
	// maybeWritten: some attempt ended with an unknown outcome. A batch the
	// node's later answers do not settle must then be reported as possibly
	// written, never sent under a new identity.
	maybeWritten bool
	// needsGap: the batch failed for good and was not appended; the
	// batches behind it must be renumbered to take its sequence numbers
	// before it may be completed.
	needsGap bool

	acked bool
	reply wire.ProduceReply
	err   error // final failure; the batch is resolved
}

// size is the batch's bytes, counted against the in-flight bytes. The
// frame is rewritten in place on a retry, never resized, and recycled
// only once the batch is off the wire.
func (b *prodBatch) size() int { return len(b.frame) - b.batchOff }

func (b *prodBatch) resolved() bool { return b.acked || b.err != nil }

// done reports whether b may be completed and forgotten.
func (b *prodBatch) done() bool { return b.acked || (b.err != nil && !b.needsGap) }

// replyEvent is a stream's answer to a batch.
type replyEvent struct {
	b   *prodBatch
	raw []byte
	err error
}

// partSender sends one partition's batches, in sequence order, on one
// stream. Produce feeds it records; whoever holds step owns everything
// else: batching, the in-flight window, retries, completion. That is its
// goroutine (run) — except on the fast path of a partition with nothing
// to wait for (no linger, no retry under way): Produce sends a lone
// record's batch itself, and the stream's reader completes the batch its
// reply answers and sends what waited behind it, sparing a request two
// hand-offs to the goroutine and back on each way (see sendNow and
// onReply).
//
// Retry rules. Replies come back in request order. When a batch fails,
// nothing new is sent until every batch in flight has answered; then the
// unacknowledged batches are sent again, in order, with the sequence
// numbers they had — the node answers a batch it already appended with its
// original offsets — except where the node's answer proves a batch was not
// appended: a batch after a batch that was not appended was not appended
// either (its sequence left a gap), so such batches are renumbered to close
// the gap of a batch that failed for good. When the node does not know the
// producer or disagrees on the next sequence, the partition takes a fresh
// producer identity and numbers its batches from 0 again.
type partSender struct {
	p    *Producer
	part uint32
	wake chan struct{}

	// step is held by whoever runs the sender's state machine: run's loop,
	// or a fast path that found it free.
	step sync.Mutex
	// armed is when run's timer fires (zero: not armed); under step.
	armed time.Time

	mu       sync.Mutex
	queue    []pendingRecord
	qbuf     []pendingRecord // the largest buffer queue has had, for reuse
	events   []replyEvent
	stopping bool
	exited   bool // run returned: records enqueued now fail at once

	// Owned by run.
	unacked      []*prodBatch
	inflight     int // batches on the wire
	inflightRecs int
	inflightB    int // bytes of the batches on the wire
	stream       requestStream
	broken       bool // the stream failed: open another before sending
	maxFrame     int
	id           ident
	nextSeq      int32
	recovering   bool
	needFresh    bool // take a fresh identity before the next send
	retryAt      time.Time
	paced        int // while > 0, the window of batches after busy answers (busyAnswer)
	builder      record.BatchBuilder
	reqID        uint32
	taken        []pendingRecord
}

func newPartSender(p *Producer, part uint32) *partSender {
	return &partSender{p: p, part: part, wake: make(chan struct{}, 1), id: p.initial}
}

func (s *partSender) enqueue(r pendingRecord) {
	s.mu.Lock()
	if s.exited {
		s.mu.Unlock()
		r.cb(r.rec, errProducerAborted)
		s.p.done(1)
		return
	}
	if len(s.queue) == cap(s.queue) && len(s.queue) <= cap(s.qbuf)/2 {
		// take consumes the queue from the front: move what is left to
		// the start of the queue's buffer rather than grow a new one.
		n := copy(s.qbuf[:cap(s.qbuf)], s.queue)
		clear(s.qbuf[n:cap(s.qbuf)])
		s.queue = s.qbuf[:n]
	}
	s.queue = append(s.queue, r)
	if cap(s.queue) > cap(s.qbuf) {
		s.qbuf = s.queue[:0]
	}
	n := len(s.queue)
	s.mu.Unlock()
	// The sender looks at the whole queue whenever it wakes. Without a
	// linger it sleeps with records queued only while its window is full,
	// and a reply wakes it: it needs waking only for a queue that was
	// empty. A lingering sender must learn at once of a full batch, which
	// may be full by bytes.
	switch {
	case s.p.cfg.linger > 0:
		s.poke()
	case n == 1:
		s.sendNow()
	}
}

// sendNow sends the queue from the caller's goroutine when nobody runs
// the sender, nothing is in flight and nothing is to wait for: the stream
// is up and no retry is under way. It only sends: completions (and so the
// records' callbacks) never run on a goroutine that called Produce.
// Otherwise it wakes run, which sends in its turn — behind requests in
// flight, records batch up while run wakes.
func (s *partSender) sendNow() {
	if !s.step.TryLock() {
		s.poke() // the holder may be past looking at the queue
		return
	}
	if s.fastPathOpen() && s.inflight == 0 {
		s.sendReady(time.Now(), 0)
		s.armTimeout()
		s.step.Unlock()
		return
	}
	s.step.Unlock()
	s.poke()
}

// fastPathOpen reports whether another goroutine than run may step the
// sender now: nothing to open, recover, renumber or linger for. Under
// step.
func (s *partSender) fastPathOpen() bool {
	return s.stream != nil && !s.broken && !s.recovering && !s.needFresh && s.p.cfg.linger == 0 &&
		s.p.abortCtx.Err() == nil
}

// armTimeout wakes run when a request went out that its timer does not
// cover: run sleeps until the oldest request on the wire times out, and
// a fast path sent one while it slept with no timer, or a later one.
// Under step.
func (s *partSender) armTimeout() {
	if b := s.oldestOnWire(); b != nil {
		d := s.replyDeadline(b)
		if s.armed.IsZero() || s.armed.After(d) {
			s.poke()
		}
	}
}

func (s *partSender) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *partSender) shutdown() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.poke()
}

// onReply is the stream's callback, on its reader goroutine: it must not
// block. When nobody runs the sender and the reply leaves nothing else on
// the wire, it applies the reply itself: completes what it acknowledged
// (running the records' callbacks, in order, here) and sends what
// waited. Otherwise, or when the reply is a failure, run does.
func (s *partSender) onReply(b *prodBatch) func([]byte, error) {
	return func(raw []byte, err error) {
		s.mu.Lock()
		s.events = append(s.events, replyEvent{b: b, raw: raw, err: err})
		s.mu.Unlock()
		if err != nil || !s.step.TryLock() {
			s.poke()
			return
		}
		if s.fastPathOpen() && s.inflight == 1 {
			s.handleEvents()
			s.complete()
			if s.fastPathOpen() && s.inflight == 0 {
				// This reply still holds its place in the stream's window
				// until the callback returns: send into the others only.
				s.sendReady(time.Now(), 1)
				s.complete()
				s.armTimeout()
				s.step.Unlock()
				s.mu.Lock()
				stopping := s.stopping
				s.mu.Unlock()
				if stopping {
					s.poke() // run closes the stream once nothing is left
				}
				return
			}
		}
		s.step.Unlock()
		s.poke()
	}
}

func (s *partSender) run() {
	defer s.p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.step.Lock()
		if !s.turn(timer) {
			s.step.Unlock()
			return
		}
		s.step.Unlock()
		select {
		case <-s.wake:
		case <-timer.C:
		case <-s.p.abortCtx.Done():
		}
	}
}

// turn is one turn of run's loop, under step: it applies the replies,
// times out, recovers, completes and sends, then sets timer for the next
// deadline. It reports false when the sender is done.
func (s *partSender) turn(timer *time.Timer) bool {
	s.handleEvents()
	if s.p.abortCtx.Err() != nil {
		s.abandon()
		return false
	}
	now := time.Now()
	s.checkProbe(now)
	s.checkRequestTimeout(now)
	if s.recovering && s.inflight == 0 && !now.Before(s.retryAt) {
		s.recover(now)
	}
	s.complete()
	if !s.recovering {
		s.sendReady(now, 0)
		s.complete()
	}
	if s.finished() {
		s.closeStream()
		return false
	}
	if d, ok := s.nextDeadline(now); ok {
		timer.Reset(max(d.Sub(now), 0))
		s.armed = d
	} else {
		timer.Stop()
		s.armed = time.Time{}
	}
	return true
}

// finished reports whether the sender may stop: shutting down with
// nothing left.
func (s *partSender) finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping && len(s.queue) == 0 && len(s.unacked) == 0 && len(s.events) == 0
}

// nextDeadline is when run must wake without being poked.
func (s *partSender) nextDeadline(now time.Time) (time.Time, bool) {
	var next time.Time
	set := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if s.recovering && s.inflight == 0 {
		set(s.retryAt)
	}
	if oldest := s.oldestOnWire(); oldest != nil {
		set(s.replyDeadline(oldest))
	}
	if s.p.cfg.linger > 0 && !s.recovering {
		s.mu.Lock()
		if len(s.queue) > 0 {
			set(s.queue[0].at.Add(s.p.cfg.linger))
		}
		s.mu.Unlock()
	}
	return next, !next.IsZero()
}

func (s *partSender) oldestOnWire() *prodBatch {
	for _, b := range s.unacked {
		if b.onWire {
			return b
		}
	}
	return nil
}

// produceProbeAfter is how long a produce request may go unanswered
// before the producer probes the node (checkProbe).
const produceProbeAfter = time.Second

// replyDeadline is when run must look at b, on the wire: to probe the
// node for its reply, then to time it out.
func (s *partSender) replyDeadline(b *prodBatch) time.Time {
	if !b.probed {
		return b.sentAt.Add(min(produceProbeAfter, s.p.backend.requestTimeout()))
	}
	return b.sentAt.Add(s.p.backend.requestTimeout())
}

// checkProbe sends the node a small request, once a send, when the
// oldest request on the wire has waited produceProbeAfter for its reply.
// A node killed after it acknowledged the request's packets, and started
// again, would otherwise hear nothing from this connection (the producer
// waits; QUIC has nothing to retransmit) and the request would wait out
// its timeout: the probe's packet draws the new node's stateless reset,
// the stream fails at once and its batches are resent on a new
// connection, where the idempotent producer's sequences dedupe them. A
// node that is only slow answers the probe and the reply keeps its
// timeout. The consumer probes its overdue polls the same way.
//
// One probe is in flight at a time, for every partition of the
// producer: one is enough to draw the reset, and a node past its CPU,
// answering every request seconds late, would otherwise get a probe for
// each overdue request, adding to the load that made it late.
func (s *partSender) checkProbe(now time.Time) {
	b := s.oldestOnWire()
	if b == nil || b.probed || now.Before(s.replyDeadline(b)) {
		return
	}
	b.probed = true
	p, ok := s.p.backend.(interface {
		probe(topic string, done func())
	})
	if !ok || !s.p.probing.CompareAndSwap(false, true) {
		return
	}
	p.probe(s.p.topic, func() { s.p.probing.Store(false) })
}

// checkRequestTimeout aborts the stream when the oldest request has waited
// too long for its reply: its batches come back as failures of unknown
// outcome and are resent on a new stream.
func (s *partSender) checkRequestTimeout(now time.Time) {
	b := s.oldestOnWire()
	if b == nil || now.Sub(b.sentAt) < s.p.backend.requestTimeout() {
		return
	}
	s.p.log.Warn("produce request timed out; resending on a new connection", "topic", s.p.topic, "partition", s.part)
	if s.stream != nil {
		s.p.backend.streamTimedOut(s.stream)
	}
	s.abortStream()
	s.handleEvents()
}

// abortStream resets the stream; every request without a reply gets an
// error event.
func (s *partSender) abortStream() {
	if s.stream == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.stream.Close(ctx)
	s.stream, s.broken = nil, true
}

func (s *partSender) closeStream() {
	if s.stream == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.p.backend.requestTimeout())
	defer cancel()
	_ = s.stream.Close(ctx)
	s.stream = nil
}

// handleEvents applies the replies received since the last call.
func (s *partSender) handleEvents() {
	s.mu.Lock()
	events := s.events
	s.events = nil
	s.mu.Unlock()
	for _, ev := range events {
		b := ev.b
		if !b.onWire {
			continue
		}
		b.onWire = false
		s.inflight--
		s.inflightRecs -= len(b.recs)
		s.inflightB -= b.size()
		s.handleReply(b, ev.raw, ev.err)
	}
}

// sendReady batches queued records and sends them while the in-flight
// window has room, less reserve batches (the places in the stream's
// window held by replies being handled).
func (s *partSender) sendReady(now time.Time, reserve int) {
	if s.needFresh && s.p.cfg.idempotent {
		s.recover(now)
		if s.recovering || s.needFresh {
			return
		}
	}
	// Every batch not yet completed counts, acknowledged or not: a retry of
	// the oldest must stay within the node's memory of the latest
	// maxInFlightBatches batches.
	window := maxInFlightBatches - reserve
	if !s.p.cfg.idempotent {
		window = 1 // without sequences, a retry behind a later batch would reorder
	}
	if s.paced > 0 {
		window = min(window, s.paced)
	}
	for len(s.unacked) < window {
		room, roomB := s.p.cfg.maxInFlight-s.inflightRecs, s.p.cfg.maxInFlightB-s.inflightB
		if s.inflight == 0 {
			room, roomB = s.p.cfg.maxBatchRecords, -1 // one batch always goes
		}
		if room <= 0 {
			return
		}
		recs, full := s.take(min(room, s.p.cfg.maxBatchRecords), roomB, now)
		if len(recs) == 0 {
			return
		}
		if s.stream == nil || s.broken {
			if err := s.ensureStream(); err != nil {
				s.requeue(recs)
				if !IsRetryable(err) && !isAbort(err) {
					s.failUnresolved(err)
					return
				}
				s.retryLater(nil, err)
				return
			}
			if !full {
				// The stream took a while: more records may have come.
				s.requeue(recs)
				continue
			}
		}
		b, err := s.build(recs)
		if err != nil {
			s.completeRecords(recs, nil, err)
			continue
		}
		s.unacked = append(s.unacked, b)
		if !s.send(b, now) {
			return
		}
	}
}

// take removes the records of the next batch from the queue: up to n
// records within the batch byte limit (a record larger than the limit
// alone). It takes nothing while a batch that is not full lingers, nor
// when the batch would not fit whole in roomB bytes (roomB < 0: no bound):
// a reply makes room for it, and a window of whole batches keeps them as
// large as the limit allows.
func (s *partSender) take(n, roomB int, now time.Time) ([]pendingRecord, bool) {
	limit := s.batchByteLimit()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return nil, false
	}
	size := record.BatchHeaderSize
	k := 0
	full := false
	for k < len(s.queue) && k < n {
		if k > 0 && size+s.queue[k].size > limit {
			full = true
			break
		}
		size += s.queue[k].size
		k++
	}
	if k == n {
		full = true
	}
	if roomB >= 0 && size > roomB {
		return nil, false
	}
	lingering := s.p.cfg.linger > 0 && now.Sub(s.queue[0].at) < s.p.cfg.linger
	if !full && lingering && !s.stopping && s.p.flushers.Load() == 0 {
		return nil, false
	}
	recs := s.taken[:0]
	recs = append(recs, s.queue[:k]...)
	s.taken = nil
	clear(s.queue[:k])
	s.queue = s.queue[k:]
	if len(s.queue) == 0 {
		s.queue = s.queue[:0:0]
	}
	return recs, full
}

// requeue puts records taken by take back at the head of the queue.
func (s *partSender) requeue(recs []pendingRecord) {
	s.mu.Lock()
	s.queue = append(append(make([]pendingRecord, 0, len(recs)+len(s.queue)), recs...), s.queue...)
	s.mu.Unlock()
}

func (s *partSender) batchByteLimit() int {
	limit := s.p.cfg.maxBatchBytes
	if s.maxFrame > 0 {
		limit = min(limit, s.maxFrame-wire.FrameHeaderSize-64-len(s.p.topic))
	}
	return limit
}

func (s *partSender) ensureStream() error {
	s.abortStream()
	st, maxFrame, err := s.p.backend.openStream(s.p.abortCtx, maxInFlightBatches)
	if err != nil {
		return err
	}
	s.stream, s.broken, s.maxFrame = st, false, maxFrame
	return nil
}

// build encodes recs as one batch inside a produce request frame, numbered
// from the next sequence. The batch is built in place in the frame, which
// may be one an acknowledged batch handed back (recycle).
func (s *partSender) build(recs []pendingRecord) (*prodBatch, error) {
	size := wire.FrameHeaderSize + 2 + len(s.p.topic) + 16 + 4 + 4 + record.BatchHeaderSize + 16
	for _, r := range recs {
		size += r.size
	}
	s.reqID++
	dst, start := wire.StartFrame(quic.FrameBuffer(size)[:0], wire.FrameHeader{Version: wire.ProtocolVersion, Kind: wire.KindProduce, ID: s.reqID})
	dst, err := (&wire.ProduceRequest{Topic: s.p.topic, TopicID: s.p.topicID, Partition: s.part}).Encode(dst)
	if err != nil {
		return nil, nodeError("produce", s.p.topic, int32(s.part), err)
	}
	// The request ends with the batch's length and bytes.
	lenAt, off := len(dst)-4, len(dst)
	bb := &s.builder
	bb.ResetInPlace(dst)
	if s.p.cfg.idempotent {
		bb.SetProducer(s.id.id, s.id.epoch, s.nextSeq)
	}
	for _, r := range recs {
		bb.Append(r.rec.wire())
	}
	if dst, err = bb.FinishInPlace(s.p.cfg.compression); err != nil {
		return nil, fmt.Errorf("sdk: produce %s/%d: %w", s.p.topic, s.part, err)
	}
	binary.LittleEndian.PutUint32(dst[lenAt:], uint32(len(dst)-off))
	if dst, err = wire.FinishFrame(dst, start); err != nil {
		return nil, nodeError("produce", s.p.topic, int32(s.part), err)
	}
	b := &prodBatch{recs: recs, frame: dst, batchOff: off, seq: s.nextSeq}
	if s.p.cfg.idempotent {
		s.nextSeq = nextSequence(s.nextSeq, len(recs))
	}
	return b, nil
}

// recycle hands back the frame of a batch acknowledged on its first and
// only send, for a later frame. Its bytes were on the wire once, on one
// stream, and the node's reply proves the stream has read all of them, so
// no writer still holds them. A batch sent more than once is never
// recycled: a broken stream's writer may still be holding its frame.
func (s *partSender) recycle(b *prodBatch) {
	if b.sends != 1 {
		return
	}
	quic.RecycleFrame(b.frame)
	b.frame = nil
}

// send puts b on the stream. It reports false when the stream refused it:
// the stream is broken and recovery resends b.
func (s *partSender) send(b *prodBatch, now time.Time) bool {
	b.onWire, b.sentAt, b.everSent, b.probed = true, now, true, false
	b.sends++
	s.inflight++
	s.inflightRecs += len(b.recs)
	s.inflightB += b.size()
	if err := s.stream.Send(s.p.abortCtx, b.frame, s.onReply(b)); err != nil {
		b.onWire = false
		s.inflight--
		s.inflightRecs -= len(b.recs)
		s.inflightB -= b.size()
		b.last, b.lastErr = notSent, err
		s.broken, s.recovering = true, true
		// A fast path (sendNow, onReply) sends outside run: wake run to
		// recover, or nothing would until a timer long set.
		s.poke()
		return false
	}
	return true
}

// complete hands the resolved batches at the head of the queue to their
// callbacks, in order.
func (s *partSender) complete() {
	for len(s.unacked) > 0 && s.unacked[0].done() {
		b := s.unacked[0]
		s.unacked[0] = nil
		s.unacked = s.unacked[1:]
		if b.acked {
			s.recycle(b)
			s.completeRecords(b.recs, &b.reply, nil)
		} else {
			s.completeRecords(b.recs, nil, b.err)
		}
	}
	if len(s.unacked) == 0 {
		s.unacked = s.unacked[:0:0]
	}
}

func (s *partSender) completeRecords(recs []pendingRecord, reply *wire.ProduceReply, err error) {
	for i, r := range recs {
		if reply != nil {
			r.rec.Offset = reply.BaseOffset + uint64(i)
			if reply.AppendTime != wire.NoAppendTime {
				r.rec.Timestamp = time.UnixMilli(reply.AppendTime)
			}
		}
		r.cb(r.rec, err)
	}
	s.p.done(len(recs))
	if cap(recs) > 0 && s.taken == nil {
		clear(recs)
		s.taken = recs[:0]
	}
}

// abandon fails everything left when Close gives up.
func (s *partSender) abandon() {
	s.abortStream()
	s.handleEvents()
	for _, b := range s.unacked {
		if !b.resolved() {
			b.err = errProducerAborted
		}
		b.needsGap = false
	}
	s.complete()
	s.mu.Lock()
	q := s.queue
	s.queue, s.exited = nil, true
	s.mu.Unlock()
	s.completeRecords(q, nil, errProducerAborted)
}
