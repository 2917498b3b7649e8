package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaProduceConsume: franz-go creates a topic, produces with its
// defaults (idempotent, compressed batches) and reads it back by offset;
// Ledge's own SDK reads the same records.
func TestKafkaProduceConsume(t *testing.T) {
	n := startKafkaNode(t)
	ctx := testContext(t)
	secret := adminToken(t, n)
	cl := kafkaClient(t, n, secret, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	kafkaCreateTopic(t, cl, "orders", 2)

	var want []string
	for i := range 20 {
		v := fmt.Sprintf("order-%02d", i)
		want = append(want, v)
		r := &kgo.Record{Topic: "orders", Partition: int32(i % 2), Key: []byte("k"), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	reader := kafkaClient(t, n, secret, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) {
		fs := reader.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != "k" || len(r.Headers) != 1 || r.Headers[0].Key != "h" {
				t.Errorf("record %d/%d: key %q headers %v", r.Partition, r.Offset, r.Key, r.Headers)
			}
			got = append(got, string(r.Value))
		})
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("kgo read %v, want %v", got, want)
	}

	// The SDK reads what kgo wrote.
	c := dial(t, n)
	cons, err := c.NewConsumer(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	got = valuesOf(pollAll(t, cons, len(want)))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the SDK read %v, want %v", got, want)
	}
}
