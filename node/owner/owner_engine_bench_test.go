package owner

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/transport/wire"
)

// The owner's hot paths on the real engine (in-memory file system, so the
// figures are CPU, not disk): poll and commit with fencing on and off, and
// produce with and without an idempotent producer.
//
//	go test ./node -run '^$' -bench 'OwnerEngine' -count 10 > out.txt
//	benchstat -col /fence out.txt; benchstat -col /idempotent out.txt

// cpuLoop runs op under b.Loop and reports its CPU time per operation.
func cpuLoop(b *testing.B, op func()) {
	start := cpuClock()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuClock()-start)/float64(b.N), "cpu-ns/op")
}

func benchEngineOwner(b *testing.B, d engine.Durability) *Owner {
	return benchEngineOwnerOn(b, vfs.NewMem(), "data", d)
}

func benchEngineOwnerOn(b *testing.B, fs vfs.FS, dir string, d engine.Durability) *Owner {
	e, err := engine.Open(engine.Options{FS: fs, Dir: dir, ReservedBytes: -1,
		Now: func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	t, err := e.CreateTopic("bench", engine.TopicConfig{Partitions: 1, Durability: d})
	if err != nil {
		b.Fatal(err)
	}
	p, err := t.Partition(0)
	if err != nil {
		b.Fatal(err)
	}
	meta := engineMeta{e: e, space: engine.NodeSpace(nodeSpace)}
	prods, err := OpenProducers(meta)
	if err != nil {
		b.Fatal(err)
	}
	sess, err := OpenSessions(meta)
	if err != nil {
		b.Fatal(err)
	}
	o, err := NewOwner(OwnerConfig{Topic: t.ID(), Log: NewEngineLog(p), Meta: meta, Producers: prods, Sessions: sess})
	if err != nil {
		b.Fatal(err)
	}
	return o
}

func BenchmarkOwnerEnginePoll(b *testing.B) {
	ctx := context.Background()
	o := benchEngineOwner(b, engine.DurabilityNone)
	if _, err := o.Produce(ctx, benchBatch(b, 100, 1024)); err != nil {
		b.Fatal(err)
	}
	req := PollRequest{Consumer: Consumer{Name: "c"}, From: FromFirst}
	b.ReportAllocs()
	cpuLoop(b, func() {
		if _, err := o.Poll(ctx, req); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkOwnerEnginePollDeliveryCommit(b *testing.B) {
	ctx := context.Background()
	o := benchEngineOwner(b, engine.DurabilityNone)
	batch := benchBatch(b, 10, 100)
	c := Consumer{Name: "c"}
	req := PollRequest{Consumer: c, From: FromNext, AutoCommit: AutoCommitOnDelivery}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if _, err := o.Produce(ctx, append([]byte(nil), batch...)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := o.Poll(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOwnerEngineCommit(b *testing.B) {
	ctx := context.Background()
	o := benchEngineOwner(b, engine.DurabilityNone)
	if _, err := o.Produce(ctx, benchBatch(b, 100, 16)); err != nil {
		b.Fatal(err)
	}
	c := Consumer{Name: "c"}
	r, err := o.Poll(ctx, PollRequest{Consumer: c, From: FromFirst})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpuLoop(b, func() {
		if err := o.Commit(ctx, CommitRequest{Consumer: c, Token: r.Token, Offset: 100}); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkOwnerEngineProduce appends batches of 100 records of 1 KiB
// under durability none, to files in a temporary directory (the page
// cache): idempotence=off sends batches without a producer; on sends them
// as an idempotent producer (fenced by the owner, tracked by the engine).
// What the fence check itself costs is measured in package fence
// (BenchmarkCheckProduce). Every variant copies the batch and rewrites its
// sequence and CRC.
func BenchmarkOwnerEngineProduce(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"on", "off"} {
		b.Run("idempotence="+mode, func(b *testing.B) {
			o := benchEngineOwnerOn(b, vfs.Default, b.TempDir(), engine.DurabilityNone)
			var bb wire.BatchBuilder
			v := make([]byte, 1024)
			for range 100 {
				bb.Append(wire.Record{Timestamp: 1, Value: v})
			}
			if mode != "off" {
				id, err := o.producers.Init(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				bb.SetProducer(uint64(id.ID), uint32(id.Epoch), 0)
			}
			tmpl, err := bb.Build(wire.CompressionNone)
			if err != nil {
				b.Fatal(err)
			}
			seq := int32(0)
			b.SetBytes(int64(len(tmpl)))
			b.ReportAllocs()
			cpuLoop(b, func() {
				batch := append([]byte(nil), tmpl...)
				binary.LittleEndian.PutUint32(batch[60:], uint32(seq))
				seq += 100
				binary.LittleEndian.PutUint32(batch[12:], wire.BatchChecksum(batch))
				if _, err := o.Produce(ctx, batch); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
