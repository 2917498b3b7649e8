package engine

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppendAlwaysBig: one producer of big records under policy
// always, as the SDK sends them: batches of at most about 1 MiB (15
// records of 64 KiB, 3 of 256 KiB, 1 of 1 MiB) and at most 8 MiB appended
// and not yet acknowledged, each batch waited for once the window is full.
// b.N counts batches. Besides MB/s it reports how the flusher's time
// splits: fsync-share is the time spent in segment fsyncs over the run's
// time (the flusher, or the syncer it hands fsyncs to, is busy throughout),
// MB/fsync and batches/fsync the size of a group commit.
//
//	go test ./engine -run XXX -bench AppendAlwaysBig -benchtime 200x -count 3
func BenchmarkAppendAlwaysBig(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("record=%dKiB", size>>10), func(b *testing.B) {
			benchAppendAlwaysBig(b, size, 8<<20)
		})
	}
}

func benchAppendAlwaysBig(b *testing.B, size, window int) {
	records := max(1, (1<<20-4096)/(size+64))
	tmpl := benchBatch(b, records, size)
	e := benchEngine(b, b.TempDir(), -1)
	defer e.Close()
	top, err := e.CreateTopic("bench", TopicConfig{Durability: DurabilityAlways})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := top.Partition(0)
	ctx := context.Background()
	// A ring of buffers, each reused once its append is durable (written,
	// and released: the tail cache is off).
	ring := make([][]byte, window/len(tmpl)+2)
	for i := range ring {
		ring[i] = append([]byte(nil), tmpl...)
	}
	type flight struct {
		last  uint64
		bytes int
	}
	var inFlight []flight
	var flightBytes int
	b.SetBytes(int64(len(tmpl)))
	b.ReportAllocs()
	st0 := p.Stats()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		for len(inFlight) > 0 && (flightBytes+len(tmpl) > window || len(inFlight) >= len(ring)-1) {
			if err := p.WaitDurable(ctx, inFlight[0].last); err != nil {
				b.Fatal(err)
			}
			flightBytes -= inFlight[0].bytes
			inFlight = inFlight[1:]
		}
		r, err := p.Append(ring[i%len(ring)])
		if err != nil {
			b.Fatal(err)
		}
		inFlight = append(inFlight, flight{last: r.Last, bytes: len(tmpl)})
		flightBytes += len(tmpl)
	}
	for _, f := range inFlight {
		if err := p.WaitDurable(ctx, f.last); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	st := p.Stats()
	syncs := float64(st.Syncs - st0.Syncs)
	if syncs > 0 {
		b.ReportMetric((st.SyncTime-st0.SyncTime).Seconds()/elapsed.Seconds(), "fsync-share")
		b.ReportMetric(float64(b.N*len(tmpl))/syncs/1e6, "MB/fsync")
		b.ReportMetric(float64(b.N)/syncs, "batches/fsync")
		b.ReportMetric((st.SyncTime-st0.SyncTime).Seconds()*1e3/syncs, "ms/fsync")
	}
}
