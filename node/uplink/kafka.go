package uplink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The forwarding position is a transactional offset commit of the consumer
// group named like the transactional id, for partition 0 of the target
// topic (partition 0 always exists; the group holds one partition's
// uplink only). Its offset is the next Ledge offset to forward; its
// metadata says "ledge/v1 history=N" (the partition's history epoch when
// committed), for audits.
const uplinkPositionPartition = 0

// connect creates the transactional client, initializes the transactional
// id (which fences every older forwarder with it and completes or aborts
// their open transaction), checks the target topic and reads the
// position back from Kafka.
func (f *Forwarder) connect(ctx context.Context) error {
	f.stats.update(func(s *Status) { s.State = Connecting })
	// No record delivery timeout: kgo measures it from the record's
	// timestamp, which is the Ledge record's (possibly hours old at the
	// edge). Each step has a deadline instead (StepTimeout).
	// No KIP-714 client metrics: the client pushes them when it closes,
	// retrying while Kafka is unreachable, which held a node's shutdown
	// 0.8-1 s whenever an uplink's connectivity was cut.
	opts := append([]kgo.Opt{
		kgo.DisableClientMetrics(),
		kgo.ProducerLinger(0),
		kgo.TransactionTimeout(max(time.Minute, 2*f.cfg.StepTimeout)),
	}, f.cfg.KafkaOpts...)
	opts = append(opts,
		kgo.SeedBrokers(f.cfg.Seeds...),
		kgo.TransactionalID(f.txnID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if f.cfg.Partitioning == SamePartition {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	f.cl = cl
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("uplink: init transactional id %s: %w", f.txnID, err)
	}
	if err := f.checkTopic(ctx); err != nil {
		return err
	}
	pos, h, ok, err := f.readPosition(ctx)
	if err != nil {
		return err
	}
	st := f.cfg.Source.State()
	if !ok {
		pos = st.LogStart // a new uplink forwards everything the partition retains
	}
	if h == 0 {
		h = st.History
	}
	if h != st.History {
		pos = f.resolvePosition(st, pos, h)
		h = st.History
	}
	f.setPosition(pos, h)
	f.stats.update(func(s *Status) {
		s.Position, s.Known, s.State = pos, true, Forwarding
		s.FailingSince = time.Time{} // Kafka answers again
	})
	f.cfg.Logger.Info("uplink: connected",
		"transactional_id", f.txnID, "topic", f.cfg.Topic, "partition", f.cfg.Partition,
		"to", f.cfg.To, "position", pos, "committed_position", ok)
	return nil
}

func (f *Forwarder) checkTopic(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(f.cfg.To)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, f.cl)
	if err != nil {
		return fmt.Errorf("uplink: metadata: %w", err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("uplink: metadata: %d topics in the reply", len(resp.Topics))
	}
	rt := resp.Topics[0]
	if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("%w: Kafka topic %q does not exist", ErrConfig, f.cfg.To)
		}
		return fmt.Errorf("uplink: metadata of %q: %w", f.cfg.To, err)
	}
	if f.cfg.Partitioning == SamePartition && int(f.cfg.Partition) >= len(rt.Partitions) {
		return fmt.Errorf("%w: Kafka topic %q has %d partitions; partitioning \"same\" needs partition %d",
			ErrConfig, f.cfg.To, len(rt.Partitions), f.cfg.Partition)
	}
	f.kafkaTopicID = rt.TopicID
	return nil
}

// readPosition fetches the committed position. It asks for stable offsets
// only: a transaction of an earlier forwarder that is still completing is
// waited for, never read half-done.
func (f *Forwarder) readPosition(ctx context.Context) (uint64, fence.HistoryEpoch, bool, error) {
	for attempt := 0; ; attempt++ {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = f.txnID
		req.RequireStable = true
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic = f.cfg.To
		t.Partitions = []int32{uplinkPositionPartition}
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, f.cl)
		if err != nil {
			return 0, 0, false, fmt.Errorf("uplink: read position: %w", err)
		}
		off, meta, code := offsetFetchResult(resp)
		err = kerr.ErrorForCode(code)
		if errors.Is(err, kerr.GroupIDNotFound) {
			return 0, 0, false, nil // never committed: a new uplink
		}
		if err == nil {
			if off < 0 {
				return 0, 0, false, nil
			}
			h, _ := parseUplinkPositionMeta(meta)
			return uint64(off), h, true, nil
		}
		if !kerr.IsRetriable(err) || attempt >= 50 {
			return 0, 0, false, fmt.Errorf("uplink: read position: %w", err)
		}
		if err := f.cfg.Wait(ctx, min(f.cfg.MinBackoff, 100*time.Millisecond)); err != nil {
			return 0, 0, false, err
		}
	}
}

func offsetFetchResult(resp *kmsg.OffsetFetchResponse) (offset int64, meta string, code int16) {
	if resp.ErrorCode != 0 {
		return -1, "", resp.ErrorCode
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			return -1, "", g.ErrorCode
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.Partition == uplinkPositionPartition {
					return p.Offset, deref(p.Metadata), p.ErrorCode
				}
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition == uplinkPositionPartition {
				return p.Offset, deref(p.Metadata), p.ErrorCode
			}
		}
	}
	return -1, "", 0
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// addPosition adds the offset commit of next to the open transaction.
func (f *Forwarder) addPosition(ctx context.Context, next uint64, history fence.HistoryEpoch) error {
	id, epoch, err := f.cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("uplink: producer id: %w", err)
	}
	if err := f.retryConcurrent(ctx, func() error {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = f.txnID, id, epoch, f.txnID
		resp, err := req.RequestWith(ctx, f.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}); err != nil {
		return fmt.Errorf("uplink: add position to transaction: %w", err)
	}
	return f.retryConcurrent(ctx, func() error {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = f.txnID, f.txnID, id, epoch
		req.Generation, req.MemberID = -1, ""
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic, t.TopicID = f.cfg.To, f.kafkaTopicID
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = uplinkPositionPartition, int64(next)
		p.Metadata = kmsg.StringPtr("ledge/v1 history=" + strconv.FormatUint(uint64(history), 10))
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, f.cl)
		if err != nil {
			return fmt.Errorf("uplink: commit position: %w", err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return fmt.Errorf("uplink: commit position: %w", err)
				}
			}
		}
		return nil
	})
}

// retryConcurrent retries fn while the coordinator is still completing an
// earlier transaction or loading (CONCURRENT_TRANSACTIONS and other
// retriable codes), a bounded number of times.
func (f *Forwarder) retryConcurrent(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || attempt >= 20 || !(errors.Is(err, kerr.ConcurrentTransactions) || kerr.IsRetriable(err)) {
			return err
		}
		if werr := f.cfg.Wait(ctx, 10*time.Millisecond); werr != nil {
			return werr
		}
	}
}

func unixMilli(ms int64) time.Time { return time.UnixMilli(ms) }

// parseUplinkPositionMeta reads the history epoch of a position commit's
// metadata.
func parseUplinkPositionMeta(meta string) (fence.HistoryEpoch, bool) {
	_, v, ok := strings.Cut(meta, "history=")
	if !ok {
		return 0, false
	}
	h, err := strconv.ParseUint(v, 10, 64)
	return fence.HistoryEpoch(h), err == nil
}

// resolvePosition carries a position committed in an earlier history of
// the partition into the current one (fence.ResolveForwardPosition), and
// counts and logs what the transitions since did to it: records purged
// before they were forwarded are dropped; records a lossy recovery took
// are logged (how many the lost offsets held is unknown), those already
// forwarded staying in Kafka.
func (f *Forwarder) resolvePosition(st owner.PartitionState, pos uint64, h fence.HistoryEpoch) uint64 {
	resolved, steps, known := fence.ResolveForwardPosition(f.cfg.Source.Lineage(), pos, h)
	if !known {
		// A restored backup older than the position: reconcile keeps the
		// position within the log.
		f.cfg.Logger.Warn("uplink: the committed position's history is unknown to the partition; keeping its offset",
			"topic", f.cfg.Topic, "partition", f.cfg.Partition, "position", pos, "history", h, "current_history", st.History)
		return pos
	}
	for _, s := range steps {
		if !s.Dropped.Empty() {
			f.noteDropped(s.Dropped.From, s.Dropped.To, "the partition was purged")
		}
		if r := s.ForwardedLost; !r.Empty() {
			f.cfg.Logger.Warn("uplink: a recovery lost records that were already forwarded; Kafka keeps them",
				"topic", f.cfg.Topic, "partition", f.cfg.Partition, "from", r.From, "to", r.To, "resume", s.UnforwardedLost.To)
		}
		if r := s.UnforwardedLost; !r.Empty() {
			f.cfg.Logger.Warn("uplink: a recovery lost records before they were forwarded (lossy recovery): "+
				"whatever the offsets held never reaches Kafka",
				"topic", f.cfg.Topic, "partition", f.cfg.Partition, "from", r.From, "to", r.To)
		}
	}
	return resolved
}

// noteDropped counts and logs the records [from, to) as gone before they
// were forwarded, those counted already excepted.
func (f *Forwarder) noteDropped(from, to uint64, why string) {
	n := f.newlyDropped(from, to)
	if n == 0 {
		return
	}
	f.stats.update(func(s *Status) { s.Dropped += n })
	f.cfg.Logger.Warn("uplink: records gone before they were forwarded: "+why,
		"topic", f.cfg.Topic, "partition", f.cfg.Partition, "from", to-n, "to", to, "dropped", n)
}
