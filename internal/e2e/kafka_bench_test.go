package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"sync/atomic"
	"testing"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduce1KiB produces 1 KiB records asynchronously to one
// partition of a topic with the default durability, through Ledge's SDK
// over QUIC and through franz-go over the Kafka listener, each client
// with its defaults but for compression (none on both; kafka-snappy is
// franz-go's default, snappy). kafka-tls is kafka over TLS.
func BenchmarkProduce1KiB(b *testing.B) {
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	b.Run("sdk", func(b *testing.B) {
		n := startKafkaNode(b)
		c := dial(b, n)
		ctx := context.Background()
		createTopic(b, c, "bench", sdk.TopicConfig{Partitions: 1})
		p, err := c.NewProducer(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		var failed atomic.Int64
		b.SetBytes(int64(len(value)))
		b.ResetTimer()
		for range b.N {
			p.Produce(ctx, &sdk.Record{Value: value}, func(_ *sdk.Record, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
		}
		if err := p.Flush(ctx); err != nil || failed.Load() > 0 {
			b.Fatalf("flush: %v, %d failed", err, failed.Load())
		}
	})
	// Uncompressed, as the SDK's batches are (the topic's compression,
	// none by default).
	b.Run("kafka", func(b *testing.B) {
		benchmarkKafkaProduce(b, value, false, kgo.ProducerBatchCompression(kgo.NoCompression()))
	})
	// Over TLS (--kafka-tls), encrypted as QUIC always is.
	b.Run("kafka-tls", func(b *testing.B) {
		benchmarkKafkaProduce(b, value, true, kgo.ProducerBatchCompression(kgo.NoCompression()))
	})
	// franz-go's default, snappy, which the node stores as S2.
	b.Run("kafka-snappy", func(b *testing.B) { benchmarkKafkaProduce(b, value, false) })
}

func benchmarkKafkaProduce(b *testing.B, value []byte, withTLS bool, opts ...kgo.Opt) {
	n := startNode(b, func(c *node.Config) { c.KafkaListen, c.KafkaTLS = "127.0.0.1:0", withTLS })
	if withTLS {
		pem, err := os.ReadFile(n.Paths().CA)
		if err != nil {
			b.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			b.Fatal("no CA certificate")
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}))
	}
	c := dial(b, n)
	createTopic(b, c, "bench", sdk.TopicConfig{Partitions: 1})
	cl := kafkaClient(b, n, adminToken(b, n), append(opts, kgo.DefaultProduceTopic("bench"))...)
	ctx := context.Background()
	var failed atomic.Int64
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	for range b.N {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil || failed.Load() > 0 {
		b.Fatalf("flush: %v, %d failed", err, failed.Load())
	}
}
