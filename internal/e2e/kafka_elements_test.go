package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaConsumerOfManyPartitions: a franz-go group consumer of a topic
// with more partitions than a Kafka request used to be allowed elements
// (384) reads every record and commits every partition: its Fetch and
// its OffsetCommit name all 450 partitions at once.
func TestKafkaConsumerOfManyPartitions(t *testing.T) {
	const partitions = 450
	n := startKafkaNode(t)
	ctx := testContext(t)
	secret := adminToken(t, n)
	prod := kafkaClient(t, n, secret, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkaCreateTopic(t, prod, "wide", partitions)
	produceKafka(t, prod, "wide", partitions, 0, partitions)

	m := &groupMember{cl: kafkaClient(t, n, secret, kgo.ConsumerGroup("wide-readers"), kgo.ConsumeTopics("wide"),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.HeartbeatInterval(100*time.Millisecond))}
	for len(m.seen) < partitions {
		m.poll(t, ctx)
	}
	if len(m.seen) != partitions {
		t.Fatalf("read %d records, want %d", len(m.seen), partitions)
	}
	desc, err := dial(t, n).DescribeGroup(ctx, "wide-readers")
	if err != nil {
		t.Fatal(err)
	}
	var committed uint64
	for _, o := range desc.Offsets {
		committed += o.Offset
	}
	if len(desc.Offsets) != partitions || committed != partitions {
		t.Fatalf("the group committed %d partitions, %d records in all; want %d of each", len(desc.Offsets), committed, partitions)
	}
}
