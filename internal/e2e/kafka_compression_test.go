package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaCompressedBatches: franz-go produces batches compressed with
// each of Kafka's codecs; franz-go and the SDK read back every record.
// The node stores each batch converted once into a Ledge batch that stays
// compressed (zstd as zstd, the others as S2).
func TestKafkaCompressedBatches(t *testing.T) {
	n := startKafkaNode(t)
	ctx := testContext(t)
	secret := adminToken(t, n)
	admin := kafkaClient(t, n, secret)
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "compressed-" + c.name
			kafkaCreateTopic(t, admin, topic, 1)
			cl := kafkaClient(t, n, secret, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c.codec))
			var want []string
			for i := range 200 {
				v := fmt.Sprintf("%s record %03d %s", c.name, i, strings.Repeat("compressible ", 20))
				want = append(want, v)
				cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}

			reader := kafkaClient(t, n, secret, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			var got []string
			for len(got) < len(want) {
				fs := reader.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("poll: %v", err)
				}
				fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			if !slices.Equal(got, want) {
				t.Fatalf("kgo read %d records, want the %d produced in order", len(got), len(want))
			}

			cons, err := dial(t, n).NewConsumer(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if got := valuesOf(pollAll(t, cons, len(want))); !slices.Equal(got, want) {
				t.Fatalf("the SDK read %d records, want the %d produced in order", len(got), len(want))
			}
		})
	}
}
