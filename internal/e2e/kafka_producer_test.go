package e2e

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaBatch is an uncompressed Kafka v2 record batch of an idempotent
// producer.
func kafkaBatch(pid int64, epoch int16, seq int32, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		body := r.AppendTo(nil)[1:] // without the zero length AppendTo starts with
		recs = kbin.AppendVarint(recs, int32(len(body)))
		recs = append(recs, body...)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		Magic: 2, PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch,
		FirstSequence: seq, NumRecords: int32(len(values)), Records: recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// kafkaProduce sends one batch to topic/0 and returns its base offset
// and error.
func kafkaProduce(t *testing.T, cl *kgo.Client, topic string, batch []byte) (int64, error) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
}

func initProducerID(t *testing.T, cl *kgo.Client, pid int64, epoch int16) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = pid, epoch
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// TestKafkaIdempotentProducerFenced: an idempotent Kafka producer's retry
// is answered with its first offsets and appended once; once the
// producer re-initializes (KIP-360), its zombie incarnation's batches
// are refused with INVALID_PRODUCER_EPOCH.
func TestKafkaIdempotentProducerFenced(t *testing.T) {
	n := startKafkaNode(t)
	ctx := testContext(t)
	cl := kafkaClient(t, n, adminToken(t, n))
	kafkaCreateTopic(t, cl, "payments", 1)

	pid, zombie := initProducerID(t, cl, -1, -1)
	first := kafkaBatch(pid, zombie, 0, "a", "b")
	if base, err := kafkaProduce(t, cl, "payments", first); err != nil || base != 0 {
		t.Fatalf("first batch: base %d, %v", base, err)
	}
	if base, err := kafkaProduce(t, cl, "payments", first); err != nil || base != 0 {
		t.Fatalf("the retried batch: base %d, %v; want its first offsets", base, err)
	}

	pid2, epoch := initProducerID(t, cl, pid, zombie)
	if pid2 != pid || epoch <= zombie {
		t.Fatalf("re-initialized as %d/%d, want %d at an epoch above %d", pid2, epoch, pid, zombie)
	}
	if _, err := kafkaProduce(t, cl, "payments", kafkaBatch(pid, zombie, 2, "zombie")); err != kerr.InvalidProducerEpoch {
		t.Fatalf("the zombie's batch: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if base, err := kafkaProduce(t, cl, "payments", kafkaBatch(pid, epoch, 0, "c")); err != nil || base != 2 {
		t.Fatalf("the new incarnation's batch: base %d, %v; want 2", base, err)
	}

	c := dial(t, n)
	cons, err := c.NewConsumer(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	if got := valuesOf(pollAll(t, cons, 3)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("the log holds %q, want a, b, c", got)
	}
}
