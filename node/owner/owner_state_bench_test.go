package owner_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// BenchmarkOwnerEngineCommitState commits an offset with 0, 10 and 100
// state changes of 100-byte values (8-byte keys) through an owner on the
// real engine, in a temporary directory (real fsyncs), under each topic
// durability policy, beside an offset-only Commit. Every commit waits for
// its metadata sync, whatever the topic's policy (a commit is acknowledged
// once durable). It reports allocations per change beyond those of a
// commit with no change: the time should grow with the bytes written, not
// with a fixed cost per change.
//
//	go test ./node/owner -run '^$' -bench 'OwnerEngineCommitState' -benchtime 200x
func BenchmarkOwnerEngineCommitState(b *testing.B) {
	ctx := context.Background()
	for _, d := range []engine.Durability{engine.DurabilityAlways, engine.DurabilityInterval, engine.DurabilityNone} {
		for _, n := range []int{-1, 0, 10, 100} {
			name := fmt.Sprintf("durability=%s/changes=%d", d, n)
			if n < 0 {
				name = fmt.Sprintf("durability=%s/changes=offset-only", d)
			}
			b.Run(name, func(b *testing.B) {
				o := ownertest.EngineOwner(b, vfs.Default, b.TempDir(), d)
				if _, err := o.Produce(ctx, ownertest.BenchBatch(b, 100, 16)); err != nil {
					b.Fatal(err)
				}
				c := owner.Consumer{Name: "c"}
				r, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromFirst})
				if err != nil {
					b.Fatal(err)
				}
				req := owner.CommitRequest{Consumer: c, Token: r.Token, Offset: 100}
				changes := make([]owner.StateChange, max(n, 0))
				value := make([]byte, 100)
				for i := range changes {
					changes[i] = owner.StateChange{Key: fmt.Appendf(nil, "key-%04d", i), Value: value}
				}
				commit := func() error { return o.CommitState(ctx, req, changes) }
				if n < 0 {
					commit = func() error { return o.Commit(ctx, req) }
				}
				if err := commit(); err != nil {
					b.Fatal(err)
				}
				if n > 0 {
					b.SetBytes(int64(n * (8 + 100)))
				}
				// What a commit of no change allocates, to tell what each
				// change adds.
				base := testing.AllocsPerRun(5, func() {
					if err := o.CommitState(ctx, req, nil); err != nil {
						b.Fatal(err)
					}
				})
				b.ReportAllocs()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				mallocs := ms.Mallocs
				cpuLoop(b, func() {
					if err := commit(); err != nil {
						b.Fatal(err)
					}
				})
				runtime.ReadMemStats(&ms)
				if n > 0 {
					perOp := float64(ms.Mallocs-mallocs) / float64(b.N)
					b.ReportMetric((perOp-base)/float64(n), "allocs/change")
				}
			})
		}
	}
}
