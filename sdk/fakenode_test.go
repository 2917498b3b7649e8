package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// fakeNode models what a node does with produce requests — the producer
// registry, fence.CheckProduce per partition, an append-only log — and
// injects faults into its streams. It implements producerBackend.
type fakeNode struct {
	mu       sync.Mutex
	nextID   uint64
	reg      map[uint64]fence.ProducerEpoch
	parts    map[uint32]*fakePartition
	requests int
	// fault decides what happens to the n-th produce request (from 0).
	fault func(n int, p uint32) fault
	// timeout is the request timeout producers get.
	timeout time.Duration
	// answerInSend has streams answer each request before Send returns,
	// on the sender's goroutine: the earliest a reply can come.
	answerInSend bool
	// endAfterReply has each stream end after its first reply, as a node
	// shutting down ends a stream after the replies it owed: the next
	// Send on it fails at once, with no callback.
	endAfterReply bool
	inits         int
	// busyRetryAfter, when set, is the retry-after of busy answers.
	busyRetryAfter time.Duration
	// seen and invalid hold the first value of every batch received and
	// of the batches refused as invalid: a node refuses the same bytes
	// the same way every time, and never refuses a batch it appended.
	seen, invalid map[string]bool
}

type fakePartition struct {
	log    []fakeRecord
	states map[uint64]*fence.ProducerState
}

type fakeRecord struct {
	value    string
	producer uint64
}

// fault is what a fake stream does with one produce request.
type fault uint8

const (
	faultNone               fault = iota
	faultBusy                     // refuse with StatusBusy, append nothing
	faultTimeoutAfter             // append, then answer StatusTimeout
	faultBreakAfter               // append, then break the stream without a reply
	faultBreakBefore              // break the stream before reading the request
	faultInvalid                  // refuse with StatusInvalidBatch, append nothing
	faultForgetProducer           // forget every producer id, then process
	faultHang                     // never answer (until the stream is aborted)
	faultDuplicateNoOffsets       // append nothing, answer StatusDuplicateSequence
)

func newFakeNode() *fakeNode {
	return &fakeNode{
		nextID:  1,
		reg:     map[uint64]fence.ProducerEpoch{},
		parts:   map[uint32]*fakePartition{},
		fault:   func(int, uint32) fault { return faultNone },
		timeout: time.Second,
		seen:    map[string]bool{},
		invalid: map[string]bool{},
	}
}

func (n *fakeNode) initProducer(context.Context) (ident, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	id := n.nextID
	n.nextID++
	n.reg[id] = 0
	n.inits++
	return ident{id: id}, nil
}

func (n *fakeNode) requestTimeout() time.Duration { return n.timeout }

func (n *fakeNode) streamTimedOut(requestStream) {}

func (n *fakeNode) openStream(context.Context, int) (requestStream, int, error) {
	s := &fakeStream{n: n, queue: make(chan fakeCall, 64), done: make(chan struct{})}
	go s.serve()
	return s, 1 << 20, nil
}

func (n *fakeNode) partition(p uint32) *fakePartition {
	fp := n.parts[p]
	if fp == nil {
		fp = &fakePartition{states: map[uint64]*fence.ProducerState{}}
		n.parts[p] = fp
	}
	return fp
}

// values returns the values appended to partition p, in order.
func (n *fakeNode) values(p uint32) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, r := range n.partition(p).log {
		out = append(out, r.value)
	}
	return out
}

type fakeCall struct {
	frame []byte
	cb    func([]byte, error)
}

// fakeStream answers produce requests in order, one at a time.
type fakeStream struct {
	n     *fakeNode
	queue chan fakeCall
	done  chan struct{} // closed when the stream is broken or aborted

	mu      sync.Mutex
	broken  bool
	pending []fakeCall // accepted and not answered
}

var errFakeConnLost = errors.New("fake: connection lost")

func (s *fakeStream) Send(ctx context.Context, frame []byte, cb func([]byte, error)) error {
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		return &quic.NotProcessedError{Cause: errFakeConnLost}
	}
	c := fakeCall{frame: frame, cb: cb}
	s.pending = append(s.pending, c)
	if s.n.answerInSend {
		s.mu.Unlock()
		s.handle(c)
		return nil
	}
	s.queue <- c
	s.mu.Unlock()
	return nil
}

// Close with an ended context aborts: every request without a reply gets
// an error, as a reset quic.Pipeline does.
func (s *fakeStream) Close(ctx context.Context) error {
	if ctx.Err() != nil {
		s.breakStream(errFakeConnLost)
		return ctx.Err()
	}
	s.breakStream(quic.ErrClosed)
	return nil
}

// breakStream fails every pending request with err and stops the stream.
func (s *fakeStream) breakStream(err error) {
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		return
	}
	s.broken = true
	pending := s.pending
	s.pending = nil
	close(s.done)
	s.mu.Unlock()
	for _, c := range pending {
		c.cb(nil, err)
	}
}

func (s *fakeStream) answer(c fakeCall, reply []byte) {
	s.mu.Lock()
	if s.broken || len(s.pending) == 0 {
		s.mu.Unlock()
		return
	}
	s.pending = s.pending[1:]
	if s.n.endAfterReply && len(s.pending) == 0 {
		s.broken = true
		close(s.done)
	}
	s.mu.Unlock()
	c.cb(reply, nil)
}

func (s *fakeStream) serve() {
	for {
		select {
		case c := <-s.queue:
			s.mu.Lock()
			broken := s.broken
			s.mu.Unlock()
			if broken {
				return // what is left was never read
			}
			s.handle(c)
		case <-s.done:
			return
		}
	}
}

func (s *fakeStream) handle(c fakeCall) {
	f, err := parseTestFrame(c.frame)
	if err != nil {
		panic(err)
	}
	var req wire.ProduceRequest
	if err := wire.DecodeRequest(f, &req); err != nil {
		panic(err)
	}
	n := s.n
	n.mu.Lock()
	k := n.requests
	n.requests++
	fl := n.fault(k, req.Partition)
	if fl == faultForgetProducer {
		clear(n.reg)
		fl = faultNone
	}
	first := firstValue(req.Batch)
	switch {
	case n.invalid[first]:
		fl = faultInvalid
	case fl == faultInvalid && n.seen[first]:
		fl = faultNone
	case fl == faultInvalid:
		n.invalid[first] = true
	}
	if fl != faultBreakBefore {
		n.seen[first] = true
	}
	n.mu.Unlock()

	errReply := func(st wire.Status, msg string) []byte {
		return wire.AppendErrorReply(nil, f.FrameHeader, st, msg)
	}
	switch fl {
	case faultBreakBefore:
		s.breakStream(&quic.NotProcessedError{Cause: errFakeConnLost})
		return
	case faultBusy:
		if n.busyRetryAfter > 0 {
			s.answer(c, wire.AppendBusyReply(nil, f.FrameHeader, "busy", n.busyRetryAfter))
			return
		}
		s.answer(c, errReply(wire.StatusBusy, "busy"))
		return
	case faultInvalid:
		s.answer(c, errReply(wire.StatusInvalidBatch, "refused on purpose"))
		return
	case faultDuplicateNoOffsets:
		s.answer(c, errReply(wire.StatusDuplicateSequence, "too old"))
		return
	case faultHang:
		<-s.done
		return
	}
	rep, st, msg := n.append(req.Partition, req.Batch)
	var reply []byte
	if st != wire.StatusOK {
		reply = errReply(st, msg)
	} else {
		reply, err = wire.AppendReply(nil, f.ID, &rep)
		if err != nil {
			panic(err)
		}
	}
	switch fl {
	case faultTimeoutAfter:
		s.answer(c, errReply(wire.StatusTimeout, "timed out"))
	case faultBreakAfter:
		s.breakStream(errFakeConnLost)
	default:
		s.answer(c, reply)
	}
}

// append checks and appends a batch as a node would.
func (n *fakeNode) append(p uint32, batch []byte) (wire.ProduceReply, wire.Status, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, err := record.VerifyBatch(batch, 0)
	if err != nil {
		return wire.ProduceReply{}, wire.StatusInvalidBatch, err.Error()
	}
	fp := n.partition(p)
	r := fence.ProduceRequest{Producer: fence.ProducerID(h.ProducerID), Epoch: fence.ProducerEpoch(h.ProducerEpoch),
		BaseSequence: h.BaseSequence, Count: int32(h.RecordCount)}
	epoch, known := n.reg[h.ProducerID]
	state := fp.states[h.ProducerID]
	v, err := fence.CheckProduce(fence.Registration{Epoch: epoch, Known: known}, state, r)
	if err != nil {
		code, _ := fence.CodeOf(err)
		return wire.ProduceReply{}, wire.FenceStatusBase + wire.Status(code), err.Error()
	}
	if v.Duplicate {
		return wire.ProduceReply{BaseOffset: v.Base, LastOffset: v.Last, AppendTime: wire.NoAppendTime, Duplicate: true}, wire.StatusOK, ""
	}
	base := uint64(len(fp.log))
	it, err := record.NewRecordIterator(batch, 0)
	if err != nil {
		return wire.ProduceReply{}, wire.StatusInvalidBatch, err.Error()
	}
	for {
		rec, ok := it.Next()
		if !ok {
			break
		}
		fp.log = append(fp.log, fakeRecord{value: string(rec.Value), producer: h.ProducerID})
	}
	last := uint64(len(fp.log)) - 1
	if h.ProducerID != 0 {
		if state == nil {
			state = new(fence.ProducerState)
			fp.states[h.ProducerID] = state
		}
		state.Record(r, base, last)
	}
	return wire.ProduceReply{BaseOffset: base, LastOffset: last, AppendTime: wire.NoAppendTime}, wire.StatusOK, ""
}

func firstValue(batch []byte) string {
	it, err := record.NewRecordIterator(batch, 0)
	if err != nil {
		panic(err)
	}
	r, _ := it.Next()
	return string(r.Value)
}

func parseTestFrame(b []byte) (wire.Frame, error) {
	h, n, err := wire.ParseFrameHeader(b, len(b))
	if err != nil {
		return wire.Frame{}, err
	}
	if n != len(b)-wire.FrameHeaderSize {
		return wire.Frame{}, fmt.Errorf("frame length mismatch")
	}
	return wire.Frame{FrameHeader: h, Body: b[wire.FrameHeaderSize:]}, nil
}
