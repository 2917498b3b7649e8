package owner_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/record"
)

// The benchmarks below measure the owner's hot paths (poll, commit, and
// produce with and without an idempotent producer), every fence check on.
// What the checks alone cost is measured in package fence (its
// BenchmarkCheck*). Compare runs with benchstat:
//
//	go test ./node/owner -run '^$' -bench 'Owner' -count 10 > out.txt
//	benchstat out.txt

func BenchmarkOwnerPoll(b *testing.B) {
	ctx := context.Background()
	m := ownertest.NewMeta()
	o := ownertest.NewOwner(b, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
	if _, err := o.Produce(ctx, ownertest.BenchBatch(b, 100, 1024)); err != nil {
		b.Fatal(err)
	}
	req := owner.PollRequest{Consumer: owner.Consumer{Name: "c"}, From: owner.FromFirst}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.Poll(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOwnerPollNext(b *testing.B) {
	ctx := context.Background()
	m := ownertest.NewMeta()
	o := ownertest.NewOwner(b, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
	batch := ownertest.BenchBatch(b, 1, 16)
	c := owner.Consumer{Name: "c"}
	req := owner.PollRequest{Consumer: c, From: owner.FromNext}
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

func BenchmarkOwnerCommit(b *testing.B) {
	ctx := context.Background()
	m := ownertest.NewMeta()
	o := ownertest.NewOwner(b, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
	if _, err := o.Produce(ctx, ownertest.BenchBatch(b, 100, 16)); err != nil {
		b.Fatal(err)
	}
	c := owner.Consumer{Name: "c"}
	r, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromFirst})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := o.Commit(ctx, owner.CommitRequest{Consumer: c, Token: r.Token, Offset: 100}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOwnerProduce appends batches of 100 records of 1 KiB with and
// without an idempotent producer; both rewrite the sequence and CRC of the
// batch each time, so they do the same work outside the owner.
func BenchmarkOwnerProduce(b *testing.B) {
	ctx := context.Background()
	for _, idem := range []bool{true, false} {
		b.Run(fmt.Sprintf("idempotent=%v", idem), func(b *testing.B) {
			m := ownertest.NewMeta()
			o := ownertest.NewOwner(b, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
			var bb record.BatchBuilder
			v := make([]byte, 1024)
			for range 100 {
				bb.Append(record.Record{Timestamp: 1, Value: v})
			}
			if idem {
				id, err := o.ProducerRegistry().Init(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				bb.SetProducer(uint64(id.ID), uint32(id.Epoch), 0)
			}
			batch, err := bb.Build(record.CompressionNone)
			if err != nil {
				b.Fatal(err)
			}
			seq := int32(0)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if idem {
					binary.LittleEndian.PutUint32(batch[60:], uint32(seq))
					seq += 100
				}
				binary.LittleEndian.PutUint32(batch[12:], record.BatchChecksum(batch))
				if _, err := o.Produce(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	_ = fence.ProducerWindow
}
