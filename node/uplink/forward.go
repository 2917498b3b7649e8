package uplink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderLedgeOffset is the Kafka record header carrying the record's Ledge
// offset (decimal), so that a Kafka consumer can audit order and gaps.
const HeaderLedgeOffset = "ledge-offset"

// Forwarder forwards one Ledge partition to Kafka (see Config). Run
// drives it; Step is one transaction. Status and RetentionFloor may be
// called from any goroutine; Run and Step from one at a time.
type Forwarder struct {
	cfg   Config
	txnID string
	stats uplinkStats

	cl           *kgo.Client // nil when not connected
	kafkaTopicID [16]byte

	posMu   sync.Mutex // guards pos and known (read by RetentionFloor)
	pos     uint64
	known   bool
	history fence.HistoryEpoch // of the partition when pos was last set

	recs []*kgo.Record // reused between steps

	// droppedTo is the end of the offsets counted as dropped so far
	// (offsets are never reused, whatever the history). A step that
	// fails after counting a drop reconnects and reads the older position
	// back from Kafka: the records below droppedTo are not counted again.
	droppedTo uint64

	// fenced is set once Kafka fenced this forwarder: it never connects
	// again (connecting would fence the newer forwarder in turn).
	fenced error
}

// NewForwarder returns a forwarder; it connects on its first step.
func NewForwarder(cfg Config) (*Forwarder, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.Source == nil:
		return nil, fmt.Errorf("%w: no source partition", ErrConfig)
	case len(cfg.Seeds) == 0:
		return nil, fmt.Errorf("%w: no Kafka seed brokers", ErrConfig)
	case cfg.To == "":
		return nil, fmt.Errorf("%w: no Kafka topic", ErrConfig)
	case cfg.NodeID == "":
		return nil, fmt.Errorf("%w: no node id", ErrConfig)
	}
	f := &Forwarder{cfg: cfg, txnID: TransactionalID(cfg.NodeID, cfg.TopicID, cfg.Partition)}
	f.stats.nowFunc = cfg.Now
	f.stats.source = cfg.Source
	f.stats.s.TransactionalID = f.txnID
	f.stats.s.Overflow = cfg.Overflow
	return f, nil
}

// TransactionalID is the forwarder's Kafka transactional id.
func (f *Forwarder) TransactionalID() string { return f.txnID }

// Status returns the forwarder's state and lag.
func (f *Forwarder) Status() Status { return f.stats.snapshot() }

// RetentionFloor is the lowest offset retention may keep: under the block
// policy, the position not yet forwarded (ok true once the position is
// known; until then nothing may be deleted either, which the caller
// expresses by treating !ok as floor 0 when the policy is block). Under
// drop-oldest there is no floor: ok is false.
func (f *Forwarder) RetentionFloor() (offset uint64, ok bool) {
	if f.cfg.Overflow == DropOldest {
		return 0, false
	}
	f.posMu.Lock()
	defer f.posMu.Unlock()
	return f.pos, true
}

// Run forwards until ctx ends or the forwarder is fenced. Failures (Kafka
// unreachable, a transaction refused) back off exponentially between
// MinBackoff and MaxBackoff and resume from the position committed in
// Kafka. It returns ErrFenced, or ctx's error.
func (f *Forwarder) Run(ctx context.Context) error {
	defer f.stats.update(func(s *Status) {
		if s.State != Fenced {
			s.State = Stopped
		}
	})
	backoff := f.cfg.MinBackoff
	for {
		_, err := f.Step(ctx)
		switch {
		case err == nil:
			backoff = f.cfg.MinBackoff
			continue
		case ctx.Err() != nil:
			f.Close()
			return ctx.Err()
		case errors.Is(err, ErrFenced):
			return err
		}
		now := f.cfg.Now()
		f.stats.update(func(s *Status) { s.State, s.Backoff, s.RetryAt = Backoff, backoff, now.Add(backoff) })
		f.cfg.Logger.Warn("uplink: step failed; backing off",
			"topic", f.cfg.Topic, "partition", f.cfg.Partition, "to", f.cfg.To,
			"backoff", backoff, "err", err)
		f.refreshLag(ctx)
		werr := f.cfg.Wait(ctx, backoff)
		f.stats.update(func(s *Status) { s.Backoff, s.RetryAt = 0, time.Time{} })
		if werr != nil {
			f.Close()
			return werr
		}
		backoff = min(2*backoff, f.cfg.MaxBackoff)
	}
}

// Close abandons the Kafka client. An open transaction is left to the next
// forwarder with the same transactional id, whose initialization aborts it
// (or to Kafka's transaction timeout).
func (f *Forwarder) Close() {
	if f.cl != nil {
		f.cl.Close()
		f.cl = nil
	}
}

// Step connects if need be and forwards what the partition holds past the
// position (up to MaxTxnBytes), waiting up to PollWait when caught up. It
// returns the number of records committed to Kafka. After an error the
// next step reconnects and re-reads the position from Kafka.
func (f *Forwarder) Step(ctx context.Context) (int, error) {
	if f.fenced != nil {
		return 0, f.fenced
	}
	n, err := f.step(ctx)
	if err != nil && ctx.Err() == nil {
		if isFenced(err) {
			f.stats.update(func(s *Status) { s.State = Fenced; s.LastError = err.Error() })
			f.cfg.Logger.Error("uplink: fenced: another forwarder initialized the same transactional id "+
				"with a newer producer epoch (a restored backup of this node, or a second process); "+
				"this forwarder stops and never writes again",
				"transactional_id", f.txnID, "topic", f.cfg.Topic, "partition", f.cfg.Partition, "err", err)
			f.Close()
			f.fenced = fmt.Errorf("%w (transactional id %s): %v", ErrFenced, f.txnID, err)
			return 0, f.fenced
		}
		now := f.cfg.Now()
		f.stats.update(func(s *Status) {
			s.Failures++
			s.LastError = err.Error()
			if s.FailingSince.IsZero() {
				s.FailingSince = now
			}
		})
	} else if err == nil {
		f.stats.update(func(s *Status) { s.FailingSince = time.Time{} })
	}
	return n, err
}

// refreshLag reads the lag from the partition alone: its state, and the
// timestamp of the oldest record not yet forwarded. A forwarder that
// cannot reach Kafka calls it between attempts, so that the lag's age
// keeps growing visibly while nothing is forwarded.
func (f *Forwarder) refreshLag(ctx context.Context) {
	st := f.cfg.Source.State()
	f.stats.observe(st)
	f.peekOldest(ctx, max(f.position(), st.LogStart), st.HighWatermark)
}

// peekOldest notes the timestamp of the first record at or past from, if
// it is below hw and not known yet: one local read of one batch.
func (f *Forwarder) peekOldest(ctx context.Context, from, hw uint64) {
	if from >= hw {
		return
	}
	res, err := f.cfg.Source.Poll(ctx, owner.PollRequest{From: owner.FromOffset, Offset: from, MaxBytes: 1})
	if err != nil || len(res.Batches) == 0 {
		return
	}
	if ts, ok := firstTimestamp(res.Batches[0], from); ok {
		f.stats.setOldest(ts, true)
	}
}

// firstTimestamp returns the timestamp of the first record of batch at or
// past offset from.
func firstTimestamp(batch []byte, from uint64) (int64, bool) {
	var it record.RecordIterator
	if err := it.Reset(batch, len(batch)); err != nil {
		return 0, false
	}
	for {
		r, ok := it.Next()
		if !ok {
			return 0, false
		}
		if r.Offset >= from {
			return r.Timestamp, true
		}
	}
}

func isFenced(err error) bool {
	return errors.Is(err, ErrFenced) || errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

func (f *Forwarder) step(ctx context.Context) (int, error) {
	if f.cl == nil {
		cctx, cancel := context.WithTimeout(ctx, f.cfg.StepTimeout)
		err := f.connect(cctx)
		cancel()
		if err != nil {
			f.Close()
			return 0, err
		}
	}
	st := f.cfg.Source.State()
	f.reconcile(st)
	f.stats.observe(st)

	res, err := f.cfg.Source.Poll(ctx, owner.PollRequest{
		From: owner.FromOffset, Offset: f.position(), MaxBytes: f.cfg.MaxTxnBytes, MaxWait: f.cfg.PollWait,
	})
	if err != nil {
		if errors.Is(err, fence.ErrOffsetOutOfRange) || errors.Is(err, fence.ErrStaleHistory) {
			return 0, nil // the partition moved (retention, purge): reconcile on the next step
		}
		return 0, fmt.Errorf("uplink: read: %w", err)
	}
	f.stats.observe(res.State)
	recs, err := f.records(res.Batches)
	if err != nil {
		return 0, err
	}
	if len(recs) == 0 {
		// Nothing to forward below Next: offsets a recovery skipped, or
		// records below the position. Move past them here; the next
		// transaction commits a position beyond them.
		if pos := f.position(); res.Next > pos {
			f.setPosition(res.Next, res.State.History)
			f.stats.update(func(s *Status) { s.Position = res.Next })
		}
		return 0, nil
	}
	f.stats.setOldest(recs[0].Timestamp.UnixMilli(), true)

	tctx, cancel := context.WithTimeout(ctx, f.cfg.StepTimeout)
	err = f.transact(tctx, recs, res.Next, res.State.History)
	cancel()
	if err != nil {
		return 0, err
	}
	f.setPosition(res.Next, res.State.History)
	f.stats.setOldest(0, false)
	// A backlog remains: its oldest record's age is the lag's age now.
	f.peekOldest(ctx, res.Next, f.cfg.Source.State().HighWatermark)
	f.stats.update(func(s *Status) {
		s.Position, s.Known, s.State = res.Next, true, Forwarding
		s.Forwarded += uint64(len(recs))
		s.Transactions++
		s.HighWatermark = max(s.HighWatermark, res.State.HighWatermark)
	})
	return len(recs), nil
}

// transact writes recs and the position next in one Kafka transaction.
// Any failure leaves the client to be recreated: the next initialization
// of the transactional id aborts whatever this transaction left open.
func (f *Forwarder) transact(ctx context.Context, recs []*kgo.Record, next uint64, history fence.HistoryEpoch) (err error) {
	defer func() {
		if err != nil && f.cl != nil {
			err = f.confirmFenced(ctx, err)
			f.Close()
		}
	}()
	if err := f.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("uplink: begin transaction: %w", err)
	}
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	wg.Add(len(recs))
	for _, r := range recs {
		f.cl.Produce(ctx, r, func(_ *kgo.Record, perr error) {
			if perr != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = perr
				}
				errMu.Unlock()
			}
			wg.Done()
		})
	}
	delivered := make(chan struct{})
	go func() { wg.Wait(); close(delivered) }()
	select {
	case <-delivered:
	case <-ctx.Done(): // records stuck in retries (Kafka unreachable): give up the client
		return fmt.Errorf("uplink: produce: %w", context.Cause(ctx))
	}
	errMu.Lock()
	defer errMu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("uplink: produce: %w", firstErr)
	}
	if err := f.addPosition(ctx, next, history); err != nil {
		return err
	}
	if f.cfg.beforeCommit != nil {
		if err := f.cfg.beforeCommit(); err != nil {
			f.cl = nil // abandoned as by a crash: no abort, no close
			return err
		}
	}
	if err := f.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("uplink: commit transaction: %w", err)
	}
	return nil
}

// confirmFenced tells a zombie from a forwarder whose transaction Kafka
// aborted on its own (the transaction timeout ran out: a suspended
// device, a long pause). Both see INVALID_PRODUCER_EPOCH. Aborting through
// the client recovers the producer id in the second case (KIP-360) and is
// refused with PRODUCER_FENCED in the first. An epoch error that recovers
// is returned as an ordinary, retryable failure.
func (f *Forwarder) confirmFenced(ctx context.Context, err error) error {
	if !isFenced(err) || errors.Is(err, kerr.ProducerFenced) {
		return err
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.StepTimeout)
	defer cancel()
	_ = f.cl.AbortBufferedRecords(actx)
	aerr := f.cl.EndTransaction(actx, kgo.TryAbort)
	if aerr != nil && isFenced(aerr) {
		return fmt.Errorf("%w (confirmed by the abort: %v)", err, aerr)
	}
	return fmt.Errorf("uplink: transaction aborted by Kafka, not fenced (abort: %v): %v", aerr, err)
}

// records converts the batches' records at or past the position into
// Kafka records.
func (f *Forwarder) records(batches [][]byte) ([]*kgo.Record, error) {
	from := f.position()
	recs := f.recs[:0]
	for _, b := range batches {
		// A fresh iterator per batch: a compressed batch decompresses into
		// the iterator's buffer, which the records' keys and values keep
		// referring to until Kafka has them.
		var it record.RecordIterator
		if err := it.Reset(b, len(b)); err != nil {
			return nil, fmt.Errorf("uplink: read: %w", err)
		}
		for {
			r, ok := it.Next()
			if !ok {
				break
			}
			if r.Offset < from {
				continue
			}
			kr := &kgo.Record{
				Topic:     f.cfg.To,
				Key:       r.Key,
				Value:     r.Value,
				Timestamp: unixMilli(r.Timestamp),
			}
			if f.cfg.Partitioning == SamePartition {
				kr.Partition = int32(f.cfg.Partition)
			}
			kr.Headers = make([]kgo.RecordHeader, 0, len(r.Headers)+1)
			for _, h := range r.Headers {
				kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: HeaderLedgeOffset, Value: strconv.AppendUint(nil, r.Offset, 10)})
			recs = append(recs, kr)
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("uplink: read: %w", err)
		}
	}
	f.recs = recs[:0]
	return recs, nil
}

func (f *Forwarder) position() uint64 {
	f.posMu.Lock()
	defer f.posMu.Unlock()
	return f.pos
}

func (f *Forwarder) setPosition(pos uint64, h fence.HistoryEpoch) {
	f.posMu.Lock()
	f.pos, f.known, f.history = pos, true, h
	f.posMu.Unlock()
}

// reconcile moves a position the partition no longer covers. Below the log
// start, the records were deleted before they were forwarded: by a purge
// (the history changed), or by retention (drop-oldest, or a node without
// the retention floor). They are counted as dropped and skipped. Above the
// high watermark, a lossy recovery lost records that were forwarded
// already: the position moves back to the high watermark, so that what the
// new history appends there is forwarded.
func (f *Forwarder) reconcile(st owner.PartitionState) {
	f.posMu.Lock()
	pos, h := f.pos, f.history
	switch {
	case pos < st.LogStart:
		f.pos, f.history = st.LogStart, st.History
	case pos > st.HighWatermark:
		f.pos, f.history = st.HighWatermark, st.History
	}
	f.posMu.Unlock()
	switch {
	case pos < st.LogStart:
		n := f.newlyDropped(pos, st.LogStart)
		f.stats.update(func(s *Status) { s.Dropped += n; s.Position = st.LogStart })
		if n == 0 {
			break
		}
		why := "retention deleted them (overflow drop-oldest)"
		if h != st.History {
			why = "the partition was purged"
		} else if f.cfg.Overflow == Block {
			why = "retention deleted them although the uplink's overflow policy is block"
		}
		f.cfg.Logger.Warn("uplink: records gone before they were forwarded: "+why,
			"topic", f.cfg.Topic, "partition", f.cfg.Partition, "from", st.LogStart-n, "to", st.LogStart, "dropped", n)
	case pos > st.HighWatermark:
		f.stats.update(func(s *Status) { s.Position = st.HighWatermark })
		f.cfg.Logger.Warn("uplink: the partition lost records that were already forwarded (lossy recovery); "+
			"forwarding resumes at the new high watermark",
			"topic", f.cfg.Topic, "partition", f.cfg.Partition, "position", pos, "high_watermark", st.HighWatermark)
	}
}

// newlyDropped returns how many of the offsets [from, to), gone before
// they were forwarded, were not counted as dropped yet, and counts them.
func (f *Forwarder) newlyDropped(from, to uint64) uint64 {
	from = max(from, f.droppedTo)
	if to <= from {
		return 0
	}
	f.droppedTo = to
	return to - from
}
