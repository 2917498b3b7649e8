package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
