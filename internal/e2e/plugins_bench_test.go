package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// BenchmarkConsumeFilter consumes the same topic of 100-byte JSON records
// without a filter and through the jsonfilter example (host helper
// matching, limits on), which keeps half of them, in the same run. It
// reports the records scanned per second of each (the filtered consumer
// scans all of them and receives half) and their ratio.
//
//	go test ./internal/e2e -run '^$' -bench ConsumeFilter -benchtime 5x
func BenchmarkConsumeFilter(b *testing.B) {
	const records = 200_000
	n := pluginNode(b, nil)
	c := dial(b, n)
	ctx := testContext(b)
	createTopic(b, c, "bench", sdk.TopicConfig{Partitions: 1})
	if _, err := c.AddPlugin(ctx, "site", sdk.PluginFilter, buildPlugin(b, jsonFilterPkg)); err != nil {
		b.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "bench", sdk.WithPartitioner(sdk.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	for i := range records {
		v := fmt.Sprintf(`{"site":%q,"n":%d,"pad":"`, []string{"lyon", "oslo"}[i%2], i)
		v += strings.Repeat("x", 100-len(v)-2) + `"}`
		p.Produce(ctx, &sdk.Record{Value: []byte(v)}, nil)
	}
	if err := p.Close(ctx); err != nil {
		b.Fatal(err)
	}

	scan := func(opts ...sdk.ConsumerOption) (time.Duration, int) {
		cons, err := c.NewConsumer(ctx, "bench", append(opts, sdk.WithMaxWait(0), sdk.WithStart(sdk.AtFirst()))...)
		if err != nil {
			b.Fatal(err)
		}
		defer cons.Close(ctx)
		start := time.Now()
		got := 0
		for {
			rs, err := cons.Poll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if len(rs) == 0 {
				break
			}
			got += len(rs)
			if rs[len(rs)-1].Offset >= records-2 {
				break
			}
		}
		return time.Since(start), got
	}
	filter := sdk.WithFilter("site", map[string]string{"field": "site", "equals": "lyon"})
	var plain, filtered time.Duration
	b.ResetTimer()
	for range b.N {
		d, got := scan()
		if got != records {
			b.Fatalf("unfiltered: %d records, want %d", got, records)
		}
		plain += d
		d, got = scan(filter)
		if got != records/2 {
			b.Fatalf("filtered: %d records, want %d", got, records/2)
		}
		filtered += d
	}
	plainRate := float64(records*b.N) / plain.Seconds()
	filteredRate := float64(records*b.N) / filtered.Seconds()
	b.ReportMetric(plainRate, "unfiltered-scanned/s")
	b.ReportMetric(filteredRate, "filtered-scanned/s")
	b.ReportMetric(100*filteredRate/plainRate, "%-of-unfiltered")
}

// BenchmarkPollBesideHostilePlugins measures an honest consumer's poll
// latency (produce one record, poll it; no plugin) on a node where, every
// other phase, four other consumers keep a looping filter (each call
// spins to its deadline) and a memory-growing one (each call grows to
// the instance limit and fails) busy. Everything runs in this one
// process. The baseline phases alternate with the loaded ones, three of
// each per iteration, so that both see the same machine. It reports both
// p99s and their ratio.
//
//	go test ./internal/e2e -run '^$' -bench PollBesideHostilePlugins -benchtime 1x -count 3
func BenchmarkPollBesideHostilePlugins(b *testing.B) {
	const (
		phase  = 3 * time.Second
		rounds = 3
	)
	n := pluginNode(b, func(cfg *node.Config) {
		cfg.Plugins.MaxStrikes = 1 << 30 // the hostile plugins stay in use
	})
	c := dial(b, n)
	ctx := testContext(b)
	createTopic(b, c, "honest", sdk.TopicConfig{Partitions: 1})
	createTopic(b, c, "bait", sdk.TopicConfig{Partitions: 1})
	hostile := buildPlugin(b, hostilePkg)
	for _, name := range []string{"loop", "hungry"} {
		if _, err := c.AddPlugin(ctx, name, sdk.PluginFilter, hostile); err != nil {
			b.Fatal(err)
		}
	}
	produce(b, c, "bait", &sdk.Record{Value: []byte("bait")})
	p, err := c.NewProducer(ctx, "honest")
	if err != nil {
		b.Fatal(err)
	}
	cons, err := c.NewConsumer(ctx, "honest", sdk.WithMaxWait(0), sdk.WithPrefetch(false))
	if err != nil {
		b.Fatal(err)
	}

	// measure produces and polls one record at a time for d and returns
	// the polls' latencies.
	measure := func(d time.Duration) []time.Duration {
		var lat []time.Duration
		for end := time.Now().Add(d); time.Now().Before(end); {
			if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte("honest")}); err != nil {
				b.Fatal(err)
			}
			for got := 0; got == 0; {
				start := time.Now()
				rs, err := cons.Poll(ctx)
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				got = len(rs)
			}
		}
		slices.Sort(lat)
		return lat
	}
	p99 := func(lat []time.Duration) time.Duration { return lat[len(lat)*99/100] }

	b.ResetTimer()
	var base, loaded []time.Duration
	for range b.N * rounds {
		base = append(base, measure(phase)...)

		hctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i, f := range []struct{ name, do string }{{"loop", "spin"}, {"hungry", "alloc"}, {"loop", "spin"}, {"hungry", "alloc"}} {
			hc := dial(b, n)
			hcons, err := hc.NewConsumer(ctx, "bait", sdk.WithMaxWait(0), sdk.WithPrefetch(false),
				sdk.WithStart(sdk.AtFirst()), sdk.WithFilter(f.name, map[string]string{"do": f.do}))
			if err != nil {
				b.Fatalf("hostile consumer %d: %v", i, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for hctx.Err() == nil {
					_, _ = hcons.Poll(hctx) // failures are the point
				}
			}()
		}
		for busy := false; !busy; {
			list, err := c.ListPlugins(ctx)
			if err != nil {
				b.Fatal(err)
			}
			busy = len(list) == 2 && list[0].Failures > 0 && list[1].Failures > 0
		}
		loaded = append(loaded, measure(phase)...)
		stop()
		wg.Wait()
	}
	b.StopTimer()
	slices.Sort(base)
	slices.Sort(loaded)
	b.ReportMetric(float64(p99(base).Microseconds()), "base-p99-us")
	b.ReportMetric(float64(p99(loaded).Microseconds()), "beside-p99-us")
	b.ReportMetric(float64(p99(loaded))/float64(p99(base)), "p99-ratio")
	list, _ := c.ListPlugins(ctx)
	b.Logf("baseline: %d polls, p50 %v p99 %v max %v; beside the hostile plugins: %d polls, p50 %v p99 %v max %v; plugins %+v",
		len(base), base[len(base)/2], p99(base), base[len(base)-1],
		len(loaded), loaded[len(loaded)/2], p99(loaded), loaded[len(loaded)-1], list)
}
