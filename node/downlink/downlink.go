package downlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Headers every appended record gains after the Kafka record's own: the
// Kafka partition and offset it came from, in decimal. The offset header
// of a producer's newest batch is the downlink's position; a consumer may
// read both to audit order and gaps, or a filter may match on them.
const (
	HeaderKafkaPartition = "ledge-kafka-partition"
	HeaderKafkaOffset    = "ledge-kafka-offset"
)

// Target is a local partition a downlink appends to: *owner.Owner
// implements it.
type Target interface {
	OrderProduce(ctx context.Context, batch []byte) (owner.ProduceResult, owner.Durable, error)
	Poll(ctx context.Context, req owner.PollRequest) (owner.PollResult, error)
	State() owner.PartitionState
	// ProducerState is the producer's state on the partition as of an
	// append step, and the durability of its newest batch.
	ProducerState(id fence.ProducerID) (fence.ProducerState, bool, owner.Durable)
}

// Registry registers the downlink's idempotent producers:
// *owner.Producers implements it.
type Registry interface {
	Init(ctx context.Context, name string) (owner.ProducerIdentity, error)
}

// Config configures the downlink of one local topic.
type Config struct {
	Spec Spec
	// Targets are the local topic's partitions, in partition order.
	Targets   []Target
	Producers Registry
	// Meta holds the checkpoints.
	Meta owner.Metadata
	// KafkaOpts are extra client options (retries, backoff, a dialer); the
	// spec's TLS and SASL are added to them.
	KafkaOpts []kgo.Opt

	// MaxBatchRecords and MaxBatchBytes bound one appended batch.
	// Defaults 1000 records and 1 MiB (a single larger record is
	// appended alone). A batch the local topic refuses as too large (its
	// max batch bytes is smaller) is built again at half the size, down
	// to one record; a record larger than the topic's bound stops the
	// downlink's partition, with that said in the status.
	MaxBatchRecords int
	MaxBatchBytes   int
	// PollWait bounds one wait for Kafka records. Default 1s.
	PollWait time.Duration
	// StepTimeout bounds the Kafka work of a start (metadata) and the
	// recovery of the position. Default 30s.
	StepTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed start or a
	// failed append; it doubles per consecutive failure. Defaults 100ms
	// and 30s. Lost connections in between are the Kafka client's to
	// retry (its own backoff).
	MinBackoff, MaxBackoff time.Duration
	// Wait sleeps between retries; default a timer honouring ctx.
	Wait func(ctx context.Context, d time.Duration) error
	// Now is the clock of FailingSince and RetryAt. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxBatchRecords <= 0 {
		c.MaxBatchRecords = 1000
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 1 << 20
	}
	if c.PollWait <= 0 {
		c.PollWait = time.Second
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 30 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(30*time.Second, c.MinBackoff)
	}
	if c.Wait == nil {
		c.Wait = sleepCtx
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrFenced: a newer incarnation of the downlink's producers exists (the
// downlink was replaced, or another process runs it). Do not retry.
var ErrFenced = errors.New("downlink: fenced by a newer incarnation of its producers")

// Downlink appends one Kafka topic to one local topic (see the package
// comment). Run drives it; Status may be called from any goroutine.
type Downlink struct {
	cfg Config

	mu    sync.Mutex
	s     Status
	conns int // open broker connections

	// Owned by Run.
	parts    map[int32]*partition
	bb       record.BatchBuilder
	maxBytes int // the batch bound: MaxBatchBytes, less if the topic refused it
}

// partition is the running state of one Kafka partition.
type partition struct {
	k      int32
	target Target
	local  uint32
	id     owner.ProducerIdentity
	seq    int32 // next sequence on the local partition, this epoch
	next   int64 // next Kafka offset to append
	behind bool  // Kafka's end was seen below next (said once)
}

// New returns a downlink that does nothing until Run.
func New(cfg Config) (*Downlink, error) {
	if err := cfg.Spec.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Targets) == 0 {
		return nil, fmt.Errorf("%w: the local topic has no partition", ErrConfig)
	}
	if cfg.Producers == nil || cfg.Meta == nil {
		return nil, fmt.Errorf("downlink: no producer registry or metadata")
	}
	cfg = cfg.withDefaults()
	return &Downlink{cfg: cfg, maxBytes: cfg.MaxBatchBytes}, nil
}

// Run consumes and appends until ctx ends or the downlink is fenced
// (ErrFenced). Every failure (Kafka unreachable at a start, an append
// refused) ends the session: after a backoff the downlink starts afresh,
// fencing its previous incarnation and reading its positions back from
// the local topic.
func (d *Downlink) Run(ctx context.Context) error {
	defer d.update(func(s *Status) {
		if s.State != Fenced {
			s.State = Stopped
		}
		s.Backoff, s.RetryAt = 0, time.Time{}
	})
	backoff := time.Duration(0)
	for {
		appended, err := d.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, fence.ErrFencedProducer) {
			d.update(func(s *Status) { s.State, s.LastError = Fenced, err.Error() })
			d.cfg.Logger.Warn("downlink: fenced: a newer incarnation runs it", "topic", d.cfg.Spec.Topic, "from", d.cfg.Spec.From, "err", err)
			return fmt.Errorf("%w: %w", ErrFenced, err)
		}
		if appended {
			backoff = 0
		}
		backoff = min(max(2*backoff, d.cfg.MinBackoff), d.cfg.MaxBackoff)
		now := d.cfg.Now()
		d.update(func(s *Status) {
			s.Failures++
			s.LastError = err.Error()
			if s.FailingSince.IsZero() {
				s.FailingSince = now
			}
			s.State, s.Backoff, s.RetryAt = Backoff, backoff, now.Add(backoff)
		})
		d.cfg.Logger.Warn("downlink: failed; starting again after a backoff",
			"topic", d.cfg.Spec.Topic, "from", d.cfg.Spec.From, "backoff", backoff, "err", err)
		if d.cfg.Wait(ctx, backoff) != nil {
			return nil
		}
	}
}

// session is one start: connect, fence, recover, then consume until a
// failure. appended says whether it appended anything.
func (d *Downlink) session(ctx context.Context) (appended bool, err error) {
	d.update(func(s *Status) { s.State, s.Backoff, s.RetryAt = Connecting, 0, time.Time{} })
	spec := d.cfg.Spec
	tlsSASL, err := spec.KafkaOpts()
	if err != nil {
		return false, err
	}
	// No KIP-714 client metrics: the client pushes them when it closes,
	// retrying while Kafka is unreachable, which would hold a stop.
	opts := append([]kgo.Opt{
		kgo.DisableClientMetrics(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, d.cfg.KafkaOpts...)
	opts = append(opts, tlsSASL...)
	opts = append(opts, kgo.SeedBrokers(spec.Seeds...), kgo.WithHooks(connHooks{d}))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	defer cl.Close()

	sctx, cancel := context.WithTimeout(ctx, d.cfg.StepTimeout)
	defer cancel()
	n, err := d.kafkaPartitions(sctx, cl)
	if err != nil {
		return false, err
	}
	if err := d.recover(sctx, n); err != nil {
		return false, err
	}
	d.readEnds(sctx, cl, n)
	offsets := map[int32]kgo.Offset{}
	for k, p := range d.parts {
		if p.next >= 0 {
			offsets[k] = kgo.NewOffset().At(p.next)
		} else {
			offsets[k] = kgo.NewOffset().AtStart()
		}
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{spec.From: offsets})
	d.update(func(s *Status) { s.State = Running })
	d.cfg.Logger.Info("downlink: running", "topic", spec.Topic, "from", spec.From, "partitions", n)

	for {
		pctx, cancel := context.WithTimeout(ctx, d.cfg.PollWait)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return appended, err
		}
		var fetchErr error
		fs.EachError(func(_ string, k int32, err error) {
			var loss *kgo.ErrDataLoss
			switch {
			case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			case errors.As(err, &loss):
				d.update(func(s *Status) { s.LastError = "downlink: " + err.Error() })
				d.cfg.Logger.Warn("downlink: Kafka lost records", "topic", spec.Topic, "from", spec.From, "partition", k, "err", err)
			case kerr.IsRetriable(err):
				d.update(func(s *Status) { s.LastError = "downlink: fetch: " + err.Error() })
			default:
				fetchErr = fmt.Errorf("downlink: fetch %s partition %d: %w", spec.From, k, err)
			}
		})
		if fetchErr != nil {
			return appended, fetchErr
		}
		n, err := d.appendFetches(ctx, fs)
		if n > 0 && !appended {
			appended = true
			d.update(func(s *Status) { s.FailingSince = time.Time{} })
		}
		if err != nil {
			return appended, err
		}
	}
}

// kafkaPartitions returns how many partitions the Kafka topic has.
// Partitions added to it later are read from the next start on.
func (d *Downlink) kafkaPartitions(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(d.cfg.Spec.From)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("downlink: metadata: %w", err)
	}
	if len(resp.Topics) != 1 {
		return 0, fmt.Errorf("downlink: metadata: %d topics in the reply", len(resp.Topics))
	}
	rt := resp.Topics[0]
	if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, fmt.Errorf("%w: Kafka topic %q does not exist", ErrConfig, d.cfg.Spec.From)
		}
		return 0, fmt.Errorf("downlink: metadata of %q: %w", d.cfg.Spec.From, err)
	}
	if len(rt.Partitions) == 0 {
		return 0, fmt.Errorf("downlink: Kafka topic %q has no partitions", d.cfg.Spec.From)
	}
	return int32(len(rt.Partitions)), nil
}

// readEnds notes Kafka's end of each partition (the last stable offset,
// what a read_committed fetch reaches), so that the status shows the lag
// from the start, before the first records arrive. A failure leaves the
// ends unknown until the fetches report them.
func (d *Downlink) readEnds(ctx context.Context, cl *kgo.Client, n int32) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, 1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = d.cfg.Spec.From
	for k := range n {
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp = k, -1
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode == 0 && rp.Offset >= 0 {
				d.updatePartition(rp.Partition, func(s *PartitionStatus) { s.HighWatermark = rp.Offset })
			}
		}
	}
}

// recover starts a new incarnation of the producer of every Kafka
// partition, which fences every earlier one, and then reads each
// partition's position back: the offset header of the newest batch the
// producer appended to its local partition, or the checkpoint when that
// batch is gone (retention, purge) or there is none.
func (d *Downlink) recover(ctx context.Context, n int32) error {
	spec := d.cfg.Spec
	d.parts = make(map[int32]*partition, n)
	status := make([]PartitionStatus, 0, n)
	for k := range n {
		local := uint32(k) % uint32(len(d.cfg.Targets))
		p := &partition{k: k, target: d.cfg.Targets[local], local: local, next: -1}
		id, err := d.cfg.Producers.Init(ctx, ProducerName(spec.TopicID, spec.From, k))
		if err != nil {
			return fmt.Errorf("downlink: init the producer of Kafka partition %d: %w", k, err)
		}
		p.id = id
		cp, haveCP, err := loadCheckpoint(d.cfg.Meta, spec.TopicID, spec.From, k)
		if err != nil {
			return err
		}
		if haveCP {
			p.next = cp
		}
		if st, ok, dur := p.target.ProducerState(id.ID); ok && st.Len() > 0 {
			// A batch of the fenced incarnation may still be on its way
			// to the disk: it counts once it is there.
			if err := dur.Wait(ctx); err != nil {
				return fmt.Errorf("downlink: wait for the newest batch of Kafka partition %d: %w", k, err)
			}
			off, found, err := d.kafkaOffsetAt(ctx, p.target, st.Batch(0).Last, k)
			if err != nil {
				return err
			}
			if found {
				// The log is the truth: under durability interval or none a
				// crash may have taken records the checkpoint counts, and
				// those are fetched again.
				p.next = off + 1
			} else {
				d.cfg.Logger.Warn("downlink: the newest appended batch is gone from the local partition; resuming from the checkpoint",
					"topic", spec.Topic, "partition", local, "kafka_partition", k, "checkpoint", cp, "have_checkpoint", haveCP)
			}
		}
		d.parts[k] = p
		status = append(status, PartitionStatus{Partition: k, Local: local, Producer: id.ID, Epoch: id.Epoch,
			Position: p.next, HighWatermark: -1, Lag: 0})
	}
	d.update(func(s *Status) {
		// Records and Deleted carry over from the previous session.
		for i := range status {
			for _, old := range s.Partitions {
				if old.Partition == status[i].Partition {
					status[i].Records, status[i].Deleted, status[i].HighWatermark = old.Records, old.Deleted, old.HighWatermark
				}
			}
		}
		s.Partitions = status
	})
	return nil
}

// kafkaOffsetAt reads the Kafka offset header of the local record at
// offset off. found is false when the record is gone (retention, purge).
// The record is durable (the caller waited for it); it may not be visible
// to polls yet, and is waited for.
func (d *Downlink) kafkaOffsetAt(ctx context.Context, t Target, off uint64, k int32) (int64, bool, error) {
	for {
		res, err := t.Poll(ctx, owner.PollRequest{From: owner.FromOffset, Offset: off, MaxBytes: 1, MaxWait: d.cfg.PollWait})
		if errors.Is(err, fence.ErrOffsetOutOfRange) || errors.Is(err, fence.ErrStaleHistory) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("downlink: read the position back: %w", err)
		}
		if len(res.Batches) == 0 {
			if res.State.LogStart > off {
				return 0, false, nil
			}
			if err := ctx.Err(); err != nil {
				return 0, false, fmt.Errorf("downlink: read the position back: offset %d never became visible: %w", off, err)
			}
			continue
		}
		var it record.RecordIterator
		for _, b := range res.Batches {
			if err := it.Reset(b, len(b)); err != nil {
				return 0, false, fmt.Errorf("downlink: read the position back: %w", err)
			}
			for {
				r, ok := it.Next()
				if !ok {
					break
				}
				if r.Offset != off {
					continue
				}
				pos, part := int64(-1), int64(-1)
				for _, h := range r.Headers {
					switch h.Key {
					case HeaderKafkaOffset:
						pos, _ = strconv.ParseInt(string(h.Value), 10, 64)
					case HeaderKafkaPartition:
						part, _ = strconv.ParseInt(string(h.Value), 10, 64)
					}
				}
				if pos < 0 || part != int64(k) {
					return 0, false, fmt.Errorf("downlink: record %d of the local partition has no %s of Kafka partition %d", off, HeaderKafkaOffset, k)
				}
				return pos, true, nil
			}
			if err := it.Err(); err != nil {
				return 0, false, fmt.Errorf("downlink: read the position back: %w", err)
			}
		}
		res.Release()
		return 0, false, fmt.Errorf("downlink: read the position back: no record at offset %d", off)
	}
}

// appendFetches appends what fs holds, one Kafka partition after the
// other, each in order, and returns once every batch is durable and the
// checkpoints are written. It returns how many records it appended.
func (d *Downlink) appendFetches(ctx context.Context, fs kgo.Fetches) (int, error) {
	total := 0
	var durables []owner.Durable
	type done struct {
		k    int32
		next int64
		n    int
	}
	var dones []done
	var err error
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		p := d.parts[fp.Partition]
		if err != nil || p == nil || fp.Topic != d.cfg.Spec.From {
			return
		}
		recs := fp.Records
		if len(recs) > 0 && recs[0].Offset < p.next && fp.HighWatermark < p.next && !p.behind {
			// Kafka's end is below what the local topic holds: the Kafka
			// topic was re-created (or truncated). Its records up to the
			// position are not appended; say so rather than wait silently.
			p.behind = true
			msg := fmt.Sprintf("downlink: Kafka partition %d of %s ends at %d, below the position %d the local topic holds: "+
				"the Kafka topic was re-created or truncated; its records below %d are not appended",
				p.k, d.cfg.Spec.From, fp.HighWatermark, p.next, p.next)
			d.update(func(s *Status) { s.LastError = msg })
			d.cfg.Logger.Warn(msg, "topic", d.cfg.Spec.Topic)
		}
		for len(recs) > 0 && recs[0].Offset < p.next {
			recs = recs[1:] // appended before this start
		}
		if fp.HighWatermark > 0 {
			d.updatePartition(p.k, func(s *PartitionStatus) { s.HighWatermark = fp.HighWatermark })
		}
		if len(recs) == 0 {
			return
		}
		if p.next >= 0 && recs[0].Offset > p.next && fp.LogStartOffset > p.next {
			gone := min(fp.LogStartOffset, recs[0].Offset) - p.next
			msg := fmt.Sprintf("downlink: Kafka deleted %d records of %s partition %d (offsets %d to %d) before they were read; skipped",
				gone, d.cfg.Spec.From, p.k, p.next, p.next+gone-1)
			d.update(func(s *Status) { s.LastError = msg })
			d.updatePartition(p.k, func(s *PartitionStatus) { s.Deleted += uint64(gone) })
			d.cfg.Logger.Warn(msg, "topic", d.cfg.Spec.Topic)
		}
		var n int
		if n, err = d.appendRecords(ctx, p, recs, &durables); err != nil {
			return
		}
		dones = append(dones, done{k: p.k, next: recs[len(recs)-1].Offset + 1, n: n})
		total += n
	})
	// Everything ordered is waited for, even after a failure: the
	// position of what did append must be exact in the status.
	for _, dur := range durables {
		if werr := dur.Wait(ctx); werr != nil && err == nil {
			err = fmt.Errorf("downlink: wait for durability: %w", werr)
		}
	}
	if err != nil {
		return 0, err
	}
	var ticket owner.Ticket
	for _, dn := range dones {
		p := d.parts[dn.k]
		p.next = dn.next
		if ticket, err = putCheckpoint(d.cfg.Meta, d.cfg.Spec.TopicID, d.cfg.Spec.From, dn.k, dn.next); err != nil {
			return total, err
		}
		d.updatePartition(dn.k, func(s *PartitionStatus) { s.Position, s.Records = dn.next, s.Records+uint64(dn.n) })
	}
	if len(dones) > 0 {
		if err := d.cfg.Meta.Sync(ctx, ticket); err != nil {
			return total, fmt.Errorf("downlink: checkpoint: %w", err)
		}
		d.update(func(s *Status) { s.Records += uint64(total) })
	}
	return total, nil
}

// maxSequence is where producer sequences wrap around to 0.
const maxSequence = 1<<31 - 1

// appendRecords orders recs, in batches, on p's local partition, and adds
// their Durables to durables.
func (d *Downlink) appendRecords(ctx context.Context, p *partition, recs []*kgo.Record, durables *[]owner.Durable) (int, error) {
	n := 0
	partHdr := []byte(strconv.FormatInt(int64(p.k), 10))
	for len(recs) > 0 {
		d.bb.Reset()
		d.bb.SetProducer(uint64(p.id.ID), uint32(p.id.Epoch), p.seq)
		i := 0
		for ; i < len(recs) && i < d.cfg.MaxBatchRecords; i++ {
			r := recs[i]
			size := len(r.Key) + len(r.Value) + 64
			for _, h := range r.Headers {
				size += len(h.Key) + len(h.Value) + 8
			}
			if i > 0 && d.bb.Size()+size > d.maxBytes {
				break
			}
			hs := make([]record.Header, 0, len(r.Headers)+2)
			for _, h := range r.Headers {
				hs = append(hs, record.Header{Key: h.Key, Value: h.Value})
			}
			hs = append(hs,
				record.Header{Key: HeaderKafkaPartition, Value: partHdr},
				record.Header{Key: HeaderKafkaOffset, Value: strconv.AppendInt(nil, r.Offset, 10)})
			d.bb.Append(record.Record{Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value, Headers: hs})
		}
		batch, err := d.bb.Build(record.CompressionNone)
		if err != nil {
			return n, fmt.Errorf("downlink: build a batch: %w", err)
		}
		_, dur, err := p.target.OrderProduce(ctx, batch)
		if errors.Is(err, record.ErrBatchTooLarge) && i > 1 {
			// The local topic takes smaller batches (its max batch
			// bytes): nothing was appended; build them smaller.
			d.maxBytes = max(len(batch)/2, 1)
			continue
		}
		if err != nil {
			return n, fmt.Errorf("downlink: append Kafka partition %d to local partition %d: %w", p.k, p.local, err)
		}
		*durables = append(*durables, dur)
		p.seq = int32((int64(p.seq) + int64(i)) & maxSequence)
		n += i
		recs = recs[i:]
	}
	return n, nil
}
