package kafka

import (
	"context"

	"github.com/ledgemq/ledge/transport/wire"
	"github.com/twmb/franz-go/pkg/kerr"
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
	if err := cc.sess.Authorize(ctx, topic, p.Partition, wire.ScopeProduce); err != nil {
		fail(err) // before a byte of the records is decompressed or converted
		return nil
	}
	var waits []func(context.Context) error
	rest := p.Records
	for len(rest) > 0 {
		batch, n, err := cc.conv.toLedgeBatch(rest)
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
