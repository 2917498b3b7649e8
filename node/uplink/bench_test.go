package uplink

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/uplink/uplinktest"
	"github.com/ledgemq/ledge/record"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Forwarding throughput of 1 KiB records into kfake, against local produce
// throughput on the same engine (in-memory file system, durability none) in
// the same run. Both report MB/s of record values and records/s.
//
//	go test ./node/uplink -run '^$' -bench 'Uplink' -benchtime 20000x
func BenchmarkUplink(b *testing.B) {
	const perBatch, size = 100, 1024
	batch := uplinkBenchBatch(b, perBatch, size)
	ctx := context.Background()

	b.Run("local-produce", func(b *testing.B) {
		o := ownertest.EngineOwner(b, vfs.NewMem(), "data", engine.DurabilityNone)
		b.SetBytes(perBatch * size)
		for b.Loop() {
			if _, err := o.Produce(ctx, append([]byte(nil), batch...)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "records/s")
	})

	b.Run("forward-kafka", func(b *testing.B) {
		o := ownertest.EngineOwner(b, vfs.NewMem(), "data", engine.DurabilityNone)
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, uplinktest.Topic))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		f, err := NewForwarder(Config{
			NodeID: "bench", TopicID: o.State().Topic, Source: o, Topic: "bench",
			Seeds: c.ListenAddrs(), To: uplinktest.Topic, PollWait: time.Millisecond,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(f.Close)
		if _, err := f.Step(ctx); err != nil { // connect outside the timing
			b.Fatal(err)
		}
		for range b.N {
			if _, err := o.Produce(ctx, append([]byte(nil), batch...)); err != nil {
				b.Fatal(err)
			}
		}
		hw := o.State().HighWatermark
		b.SetBytes(perBatch * size)
		b.ResetTimer()
		for f.Status().Position < hw {
			if _, err := f.Step(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		s := f.Status()
		b.ReportMetric(float64(s.Forwarded)/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(float64(s.Forwarded)/float64(s.Transactions), "records/txn")
	})
}

func uplinkBenchBatch(b *testing.B, records, size int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var bb record.BatchBuilder
	for i := range records {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(rng.UintN(256))
		}
		bb.Append(record.Record{Timestamp: 1_700_000_000_000 + int64(i), Value: v})
	}
	batch, err := bb.Build(record.CompressionNone)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}
