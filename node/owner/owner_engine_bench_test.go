package owner_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/record"
)

// The owner's hot paths on the real engine (in-memory file system, so the
// figures are CPU, not disk): poll and commit with fencing on and off, and
// produce with and without an idempotent producer.
//
//	go test ./node/owner -run '^$' -bench 'OwnerEngine' -count 10 > out.txt
//	benchstat -col /fence out.txt; benchstat -col /idempotent out.txt

// cpuLoop runs op under b.Loop and reports its CPU time per operation.
func cpuLoop(b *testing.B, op func()) {
	start := cpuClock()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuClock()-start)/float64(b.N), "cpu-ns/op")
}

func BenchmarkOwnerEnginePoll(b *testing.B) {
	ctx := context.Background()
	o := ownertest.EngineOwner(b, vfs.NewMem(), "data", engine.DurabilityNone)
	if _, err := o.Produce(ctx, ownertest.BenchBatch(b, 100, 1024)); err != nil {
		b.Fatal(err)
	}
	req := owner.PollRequest{Consumer: owner.Consumer{Name: "c"}, From: owner.FromFirst}
	b.ReportAllocs()
	cpuLoop(b, func() {
		if _, err := o.Poll(ctx, req); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkOwnerEnginePollDeliveryCommit(b *testing.B) {
	ctx := context.Background()
	o := ownertest.EngineOwner(b, vfs.NewMem(), "data", engine.DurabilityNone)
	batch := ownertest.BenchBatch(b, 10, 100)
	c := owner.Consumer{Name: "c"}
	req := owner.PollRequest{Consumer: c, From: owner.FromNext, AutoCommit: owner.AutoCommitOnDelivery}
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
	o := ownertest.EngineOwner(b, vfs.NewMem(), "data", engine.DurabilityNone)
	if _, err := o.Produce(ctx, ownertest.BenchBatch(b, 100, 16)); err != nil {
		b.Fatal(err)
	}
	c := owner.Consumer{Name: "c"}
	r, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromFirst})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpuLoop(b, func() {
		if err := o.Commit(ctx, owner.CommitRequest{Consumer: c, Token: r.Token, Offset: 100}); err != nil {
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
			o := ownertest.EngineOwner(b, vfs.Default, b.TempDir(), engine.DurabilityNone)
			var bb record.BatchBuilder
			v := make([]byte, 1024)
			for range 100 {
				bb.Append(record.Record{Timestamp: 1, Value: v})
			}
			if mode != "off" {
				id, err := o.ProducerRegistry().Init(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				bb.SetProducer(uint64(id.ID), uint32(id.Epoch), 0)
			}
			tmpl, err := bb.Build(record.CompressionNone)
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
				binary.LittleEndian.PutUint32(batch[12:], record.BatchChecksum(batch))
				if _, err := o.Produce(ctx, batch); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
