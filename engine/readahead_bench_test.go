package engine

import (
	"context"
	"hash/crc32"
	"testing"
)

// BenchmarkReplayPolls reads a 256 MiB log from the start in 4 MiB reads,
// as a node serves a replaying consumer's polls: it checksums each result
// (a stand-in for sending it) and then releases it, as the node does once
// the reply is written. One op is one read.
func BenchmarkReplayPolls(b *testing.B) {
	const logBytes = 256 << 20
	e := benchEngine(b, b.TempDir(), -1)
	defer e.Close()
	p, last := benchLog(b, e, logBytes, false)
	ctx := context.Background()
	tab := crc32.MakeTable(crc32.Castagnoli)
	from := uint64(0)
	b.SetBytes(4 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if from > last {
			from = 0
		}
		plan, err := p.PlanRead(from, 4<<20)
		if err != nil {
			b.Fatal(err)
		}
		res, err := plan.Execute(ctx)
		plan.Release()
		if err != nil {
			b.Fatal(err)
		}
		var sum uint32
		for _, bt := range res.Batches {
			sum = crc32.Update(sum, tab, bt)
		}
		from = res.Next
		res.Release()
	}
}
