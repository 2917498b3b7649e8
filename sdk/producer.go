package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgemq/ledge/record"

	"github.com/ledgemq/ledge/transport/wire"
)

// Producer sends records to one topic: batched per partition, pipelined
// on one ordered stream per partition, retried without duplicates or
// reordering (see the package documentation). It is safe for concurrent
// use.
type Producer struct {
	topic   string
	topicID [16]byte
	parts   int
	cfg     producerConfig
	backend producerBackend
	log     *slog.Logger

	initial ident // the identity every partition starts under

	partMu      sync.Mutex // serializes the partitioner
	partitioner Partitioner

	flushers atomic.Int32  // Flush calls waiting: send partial batches at once
	busy     atomic.Uint64 // busy answers (Stats)
	probing  atomic.Bool   // a probe of the node is in flight (checkProbe)

	abortCtx context.Context // ends when Close gives up on what is left
	abort    context.CancelFunc

	mu          sync.Mutex
	senders     []*partSender
	outstanding int           // records accepted and not completed, sent or not
	room        chan struct{} // closed when outstanding drops below the buffer limit, when set
	drained     chan struct{} // closed when outstanding reaches 0, when set
	closing     bool
	wg          sync.WaitGroup
}

// ident is a producer identity: batches carry it, numbered per partition.
type ident struct {
	id    uint64
	epoch uint32
}

// producerBackend is what a producer needs of a client (and what tests
// fake).
type producerBackend interface {
	streamOpener
	// initProducer registers a fresh producer identity.
	initProducer(ctx context.Context) (ident, error)
	requestTimeout() time.Duration
	// streamTimedOut is told that a request on st got no reply in time.
	streamTimedOut(st requestStream)
}

type clientBackend struct{ c *Client }

func (b clientBackend) openStream(ctx context.Context, depth int) (requestStream, int, error) {
	return b.c.openStream(ctx, depth)
}

func (b clientBackend) initProducer(ctx context.Context) (ident, error) {
	var reply wire.InitProducerReply
	if err := b.c.call(ctx, &wire.InitProducerRequest{}, &reply); err != nil {
		return ident{}, err
	}
	return ident{id: reply.ProducerID, epoch: reply.ProducerEpoch}, nil
}

func (b clientBackend) requestTimeout() time.Duration { return b.c.cfg.requestTimeout }

func (b clientBackend) streamTimedOut(st requestStream) { b.c.streamTimedOut(st) }

// probe asks the node about topic on the client's connection, and drops
// the answer: a request whose packets draw a restarted node's stateless
// reset (partSender.checkProbe). done is called once it has ended.
func (b clientBackend) probe(topic string, done func()) {
	ctx, cancel := context.WithTimeout(context.Background(), b.c.cfg.requestTimeout)
	go func() {
		defer done()
		defer cancel()
		_ = b.c.call(ctx, &wire.DescribeTopicRequest{Name: topic}, &wire.DescribeTopicReply{})
	}()
}

// NewProducer reads the topic's metadata, registers an idempotent producer
// (unless WithIdempotence(false)) and returns a producer for the topic.
func (c *Client) NewProducer(ctx context.Context, topic string, opts ...ProducerOption) (*Producer, error) {
	d, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	return newProducer(ctx, clientBackend{c}, c.cfg.logger, d.TopicInfo, opts)
}

func newProducer(ctx context.Context, b producerBackend, log *slog.Logger, info TopicInfo, opts []ProducerOption) (*Producer, error) {
	cfg := defaultProducerConfig()
	for _, o := range opts {
		o.applyProducer(&cfg)
	}
	if !cfg.compressionSet {
		cfg.compression = info.Config.Compression
	}
	if !cfg.compression.Valid() {
		return nil, fmt.Errorf("sdk: unknown compression %d", cfg.compression)
	}
	cfg.maxRecordBytes = cfg.maxBatchBytes
	if m := info.Config.MaxBatchBytes; m > 0 {
		cfg.maxBatchBytes = min(cfg.maxBatchBytes, m)
		cfg.maxRecordBytes = m
	}
	if cfg.partitioner == nil {
		cfg.partitioner = KeyHashPartitioner(cfg.maxBatchRecords)
	}
	if info.Config.Partitions <= 0 {
		return nil, fmt.Errorf("sdk: topic %s has no partitions", info.Name)
	}
	p := &Producer{
		topic:       info.Name,
		topicID:     info.ID,
		parts:       info.Config.Partitions,
		cfg:         cfg,
		backend:     b,
		log:         log,
		partitioner: cfg.partitioner,
		senders:     make([]*partSender, info.Config.Partitions),
	}
	if cfg.idempotent {
		id, err := b.initProducer(ctx)
		if err != nil {
			return nil, err
		}
		p.initial = id
	}
	p.abortCtx, p.abort = context.WithCancel(context.Background())
	return p, nil
}

// Topic returns the producer's topic.
func (p *Producer) Topic() string { return p.topic }

// Partitions returns the number of partitions of the topic.
func (p *Producer) Partitions() int { return p.parts }

// Produce hands rec to the producer and returns; cb (which may be nil)
// receives rec with its Partition and Offset set, or the error that
// failed it. Callbacks of one partition run one at a time, in the order of
// Produce calls, on a goroutine of the producer's (the partition's own, or
// the reader of its stream, which runs the callback of a reply that
// leaves nothing else to wait for) and never inside Produce, except for a
// record Produce refuses (below). They must not block for long (the
// partition's other replies wait), and must not call the producer
// (Produce may wait for room that only the callback's goroutine can free).
//
// Produce waits while the producer holds WithMaxBufferedRecords records;
// ctx bounds only that wait (a record once accepted is sent whatever
// becomes of ctx). When ctx ends first, or the producer is closed, or the
// record is invalid (too large, a partition out of range), cb is called
// with the error before Produce returns. rec must not be modified until cb
// is called.
func (p *Producer) Produce(ctx context.Context, rec *Record, cb func(*Record, error)) {
	if cb == nil {
		cb = func(*Record, error) {}
	}
	if rec.Topic == "" {
		rec.Topic = p.topic
	} else if rec.Topic != p.topic {
		cb(rec, fmt.Errorf("sdk: record for topic %q given to the producer of %q", rec.Topic, p.topic))
		return
	}
	if n := rec.size() + record.BatchHeaderSize; n > p.cfg.maxRecordBytes {
		cb(rec, &Error{Op: "produce", Topic: p.topic, Partition: -1, Status: wire.StatusMessageTooLarge,
			Message: fmt.Sprintf("record of about %d bytes exceeds the topic's batch limit of %d", n, p.cfg.maxRecordBytes)})
		return
	}
	if rec.Timestamp.IsZero() {
		rec.Timestamp = time.Now()
	}
	p.partMu.Lock()
	part := p.partitioner.Partition(rec, p.parts)
	p.partMu.Unlock()
	if part < 0 || part >= p.parts {
		cb(rec, &Error{Op: "produce", Topic: p.topic, Partition: int32(part), Status: wire.StatusUnknownPartition,
			Message: topicHasPartitions(p.parts)})
		return
	}
	rec.Partition = int32(part)
	s, err := p.admit(ctx, part)
	if err != nil {
		cb(rec, err)
		return
	}
	s.enqueue(pendingRecord{rec: rec, cb: cb, at: time.Now(), size: rec.size()})
}

// ProduceSync produces recs and waits for their acknowledgements. It
// returns the first error (each record's own outcome is in its Offset, or
// use Produce with a callback). Records are acknowledged in order within a
// partition. ctx bounds the wait for buffer space and for the
// acknowledgements; records already sent when it ends may still be
// written.
func (p *Producer) ProduceSync(ctx context.Context, recs ...*Record) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	wg.Add(len(recs))
	for _, r := range recs {
		p.Produce(ctx, r, func(_ *Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return first
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Flush sends every record produced so far without waiting for a linger,
// and waits until each is acknowledged or failed (records produced while
// Flush waits are waited for too). It returns ctx's error if ctx ends
// first; the records are still being sent.
func (p *Producer) Flush(ctx context.Context) error {
	p.flushers.Add(1)
	defer p.flushers.Add(-1)
	p.mu.Lock()
	if p.outstanding == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.drained == nil {
		p.drained = make(chan struct{})
	}
	drained := p.drained
	senders := append([]*partSender(nil), p.senders...)
	p.mu.Unlock()
	for _, s := range senders {
		if s != nil {
			s.poke()
		}
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Close flushes the producer and ends its streams. When ctx ends before
// every record is acknowledged, the rest fail with ErrClosed (those
// already sent may have been written). Produce after Close fails with
// ErrClosed.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closing = true
	p.mu.Unlock()
	err := p.Flush(ctx)
	if err != nil {
		p.abort()
	}
	p.mu.Lock()
	senders := append([]*partSender(nil), p.senders...)
	p.mu.Unlock()
	for _, s := range senders {
		if s != nil {
			s.shutdown()
		}
	}
	p.wg.Wait()
	p.abort()
	return err
}

// admit takes room for one record of partition part, waiting while the
// producer holds WithMaxBufferedRecords records, and returns the
// partition's sender, started on first use.
func (p *Producer) admit(ctx context.Context, part int) (*partSender, error) {
	p.mu.Lock()
	for p.outstanding >= p.cfg.maxBuffered && !p.closing {
		if p.room == nil {
			p.room = make(chan struct{})
		}
		room := p.room
		p.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-p.abortCtx.Done():
			return nil, ErrClosed
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if p.closing {
		return nil, ErrClosed
	}
	p.outstanding++
	if s := p.senders[part]; s != nil {
		return s, nil
	}
	s := newPartSender(p, uint32(part))
	p.senders[part] = s
	p.wg.Add(1)
	go s.run()
	return s, nil
}

// done releases n completed records' room in the buffer and their share
// of Flush's count.
func (p *Producer) done(n int) {
	p.mu.Lock()
	p.outstanding -= n
	if p.room != nil && p.outstanding < p.cfg.maxBuffered {
		close(p.room)
		p.room = nil
	}
	if p.outstanding == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
	p.mu.Unlock()
}

// errProducerAborted is the error of records a closing producer gave up on.
var errProducerAborted = fmt.Errorf("%w: the producer was closed before the record was acknowledged", ErrClosed)

func isAbort(err error) bool { return errors.Is(err, context.Canceled) }
