package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/ledgemq/ledge/transport/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (cc *conn) initProducerID(ctx context.Context, m *kmsg.InitProducerIDRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.InitProducerIDResponse)
	r.ProducerID, r.ProducerEpoch = -1, -1
	if m.TransactionalID != nil {
		// Transactions are not served: say so, rather than time out.
		r.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return r
	}
	req := &wire.InitProducerRequest{}
	if m.ProducerID >= 0 {
		// KIP-360: the producer asks for its next epoch.
		req.ProducerID, req.ProducerEpoch = uint64(m.ProducerID), uint32(max(m.ProducerEpoch, 0))
	}
	rep, err := cc.sess.InitProducer(ctx, req)
	if err != nil {
		r.ErrorCode = codeOf(err)
		return r
	}
	if rep.ProducerID > 1<<63-1 || rep.ProducerEpoch > 1<<15-1 {
		r.ErrorCode = kerr.ProducerFenced.Code
		return r
	}
	r.ProducerID, r.ProducerEpoch = int64(rep.ProducerID), int16(rep.ProducerEpoch)
	return r
}

// produce orders each partition's batches through its owner, in order,
// and returns the response with finish, which waits for the appends to be
// durable and fills in the errors of those that failed: the connection
// reads its next request meanwhile (a producer's requests in flight
// share the node's syncs), and sends the response once finish returned.
func (cc *conn) produce(ctx context.Context, m *kmsg.ProduceRequest) (kmsg.Response, func()) {
	r := m.ResponseKind().(*kmsg.ProduceResponse)
	var waits []func()
	r.Topics = make([]kmsg.ProduceResponseTopic, len(m.Topics))
	for i := range m.Topics {
		t, rt := &m.Topics[i], &r.Topics[i]
		*rt = kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for j := range t.Partitions {
			p, rp := &t.Partitions[j], &rt.Partitions[j]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			if m.TransactionID != nil {
				rp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				continue
			}
			if w := cc.producePartition(ctx, t.Topic, p, rp); w != nil {
				waits = append(waits, w)
			}
		}
	}
	if len(waits) == 0 {
		return r, nil
	}
	return r, func() {
		for _, w := range waits {
			w()
		}
	}
}

// producePartition orders a partition's batches and returns what waits
// for them (nil if there is nothing to wait for).
func (cc *conn) producePartition(ctx context.Context, topic string, p *kmsg.ProduceRequestTopicPartition, rp *kmsg.ProduceResponseTopicPartition) func() {
	if p.Partition < 0 {
		rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return nil
	}
	rp.BaseOffset, rp.LogAppendTime = -1, -1
	fail := func(err error) {
		rp.ErrorCode = codeOf(err)
		if rp.ErrorCode == kerr.UnknownServerError.Code || rp.ErrorCode == kerr.CorruptMessage.Code {
			msg := err.Error()
			rp.ErrorMessage = &msg
		}
	}
	var waits []func(context.Context) error
	rest := p.Records
	for len(rest) > 0 {
		batch, n, err := toLedgeBatch(rest)
		if err != nil {
			rp.ErrorCode = kerr.CorruptMessage.Code
			msg := err.Error()
			rp.ErrorMessage = &msg
			break
		}
		rest = rest[n:]
		rep, wait, err := cc.sess.Produce(ctx, &wire.ProduceRequest{Topic: topic, Partition: uint32(p.Partition), Batch: batch})
		if err != nil {
			fail(err)
			break
		}
		if rp.BaseOffset < 0 {
			rp.BaseOffset = int64(rep.BaseOffset)
		}
		if wait != nil {
			waits = append(waits, wait)
		}
	}
	if len(waits) == 0 {
		return nil
	}
	return func() {
		for _, w := range waits {
			if err := w(ctx); err != nil && rp.ErrorCode == 0 {
				fail(err)
				rp.BaseOffset = -1
			}
		}
	}
}

// Kafka record batch v2 attributes.
const (
	kafkaCompressionMask = 0x07
	kafkaAppendTime      = 0x08
	kafkaTransactional   = 0x10
	kafkaControl         = 0x20
	// kafkaBatchHeader is the size of a v2 batch before its records.
	kafkaBatchHeader = 61
)

var (
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
	decompressor = kgo.DefaultDecompressor()
)

// toLedgeBatch converts the first Kafka v2 batch of b into a Ledge batch
// (uncompressed, the producer's id, epoch and sequence kept), and returns
// how many bytes of b it took.
func toLedgeBatch(b []byte) ([]byte, int, error) {
	if len(b) < kafkaBatchHeader {
		return nil, 0, errors.New("kafka: truncated record batch")
	}
	length := int(int32(binary.BigEndian.Uint32(b[8:])))
	n := 12 + length
	if length < kafkaBatchHeader-12 || n > len(b) {
		return nil, 0, errors.New("kafka: record batch length out of range")
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b[:n]); err != nil {
		return nil, 0, err
	}
	if kb.Magic != 2 {
		return nil, 0, fmt.Errorf("kafka: record batch magic %d (only v2 batches are accepted)", kb.Magic)
	}
	if crc32.Checksum(b[21:n], castagnoli) != uint32(kb.CRC) {
		return nil, 0, errors.New("kafka: record batch CRC mismatch")
	}
	if kb.Attributes&(kafkaTransactional|kafkaControl) != 0 {
		return nil, 0, errors.New("kafka: transactional batches are not served")
	}
	if kb.NumRecords <= 0 {
		return nil, 0, errors.New("kafka: empty record batch")
	}
	records := kb.Records
	if codec := kgo.CompressionCodecType(kb.Attributes & kafkaCompressionMask); codec != 0 {
		var err error
		if records, err = decompressor.Decompress(records, codec); err != nil {
			return nil, 0, fmt.Errorf("kafka: decompressing a record batch: %w", err)
		}
	}
	var bb wire.BatchBuilder
	if kb.ProducerID >= 0 {
		bb.SetProducer(uint64(kb.ProducerID), uint32(max(kb.ProducerEpoch, 0)), kb.FirstSequence)
	}
	var rec kmsg.Record
	var hdrs []wire.Header
	for i := int32(0); i < kb.NumRecords; i++ {
		l, k := binary.Varint(records)
		if k <= 0 || l < 0 || int64(len(records)-k) < l {
			return nil, 0, errors.New("kafka: truncated record")
		}
		end := k + int(l)
		if err := rec.ReadFrom(records[:end]); err != nil {
			return nil, 0, fmt.Errorf("kafka: record %d: %w", i, err)
		}
		records = records[end:]
		hdrs = hdrs[:0]
		for _, h := range rec.Headers {
			hdrs = append(hdrs, wire.Header{Key: h.Key, Value: h.Value})
		}
		bb.Append(wire.Record{
			Timestamp: kb.FirstTimestamp + rec.TimestampDelta64,
			Key:       rec.Key, Value: rec.Value, Headers: hdrs,
		})
	}
	out, err := bb.Build(wire.CompressionNone)
	if err != nil {
		return nil, 0, err
	}
	return out, n, nil
}
