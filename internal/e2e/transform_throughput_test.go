package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

var (
	throughputRecords = flag.Int("throughput.records", 0,
		"records of 1 KiB in TestTransformThroughputThroughTheBinary (0 skips the test; 200000, with -throughput.rounds 5, for the figures of docs/PIPELINES.md)")
	throughputRounds = flag.Int("throughput.rounds", 3, "alternated rounds of TestTransformThroughputThroughTheBinary")
)

// TestTransformThroughputThroughTheBinary measures the two plugin paths
// of docs/PIPELINES.md ("Throughput") through the ledge binary, as a user
// runs them: -throughput.records records of 1 KiB JSON in a topic of
// durability none, then, in each round, (a) a consumer reads them all
// through the JSON example filter, which keeps half, (b) for each of the
// transforms pass, envelope and upper, `ledge transform add` from that
// topic to a new one, timed until the output holds every record. A plain
// consumer's read of the same records (no plugin) is measured too: the
// node's cost of serving the bytes. It logs records per second, the serve
// process's CPU per record (utime and stime of /proc/PID/stat) and each
// transform's ratio to the filter, per round and as medians.
//
//	go test ./internal/e2e -run TestTransformThroughputThroughTheBinary -v -throughput.records 200000 -throughput.rounds 5
func TestTransformThroughputThroughTheBinary(t *testing.T) {
	total := *throughputRecords
	if total <= 0 {
		t.Skip("a measurement: run with -throughput.records N")
	}
	bin := buildLedge(t)
	node := newServedLedge(t, bin, filepath.Join(t.TempDir(), "ledge-data"))
	node.start()
	defer node.checkNoPanic()
	ctx := context.Background()
	c := node.dial(ctx)
	defer c.Close()
	t0 := sdk.TopicConfig{Partitions: 1, Durability: sdk.DurabilityNone}
	if _, err := c.CreateTopic(ctx, "raw", t0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name string
		kind sdk.PluginKind
		pkg  string
	}{{"json", sdk.PluginFilter, jsonFilterPkg}, {"map", sdk.PluginTransform, mapTransformPkg},
		{"envelope", sdk.PluginTransform, envelopePkg}} {
		if _, err := c.AddPlugin(ctx, p.name, p.kind, buildPlugin(t, p.pkg)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.NewProducer(ctx, "raw")
	if err != nil {
		t.Fatal(err)
	}
	const recordLen = 1024
	pad := strings.Repeat("x", recordLen)
	for i := range total {
		site := []string{"lyon", "oslo"}[i%2]
		v := `{"site":"` + site + `","pad":"` + pad[:recordLen-len(`{"site":"lyon","pad":""}`)] + `"}`
		p.Produce(ctx, &sdk.Record{Key: []byte("sensor"), Value: []byte(v)}, nil)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	pid := node.cmd.Process.Pid

	// A run's figures: wall time and the node's CPU time.
	type run struct{ wall, cpu time.Duration }
	measure := func(what func()) run {
		cpu0, wall0 := processTicks(t, pid), time.Now()
		what()
		return run{time.Since(wall0), processTicks(t, pid) - cpu0}
	}
	scan := func(opts ...sdk.ConsumerOption) {
		cons, err := c.NewConsumer(ctx, "raw", append(opts, sdk.WithMaxWait(0), sdk.WithStart(sdk.AtFirst()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close(ctx)
		last := uint64(total - 1)
		if len(opts) > 0 {
			last = uint64(total-1) &^ 1 // the last "lyon"
		}
		for deadline := time.Now().Add(safety); ; {
			rs, err := cons.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) > 0 && uint64(rs[len(rs)-1].Offset) >= last {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the consumer never reached offset %d", last)
			}
		}
	}
	transform := func(name, plugin, to string, params ...string) {
		args := []string{"transform", "add", name, "--plugin", plugin, "--from", "raw", "--to", to}
		for _, kv := range params {
			args = append(args, "--param", kv)
		}
		if out, err := node.client(args...).CombinedOutput(); err != nil {
			t.Fatalf("ledge %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for deadline := time.Now().Add(safety); ; time.Sleep(2 * time.Millisecond) {
			d, err := c.DescribeTopic(ctx, to)
			if err != nil {
				t.Fatal(err)
			}
			if d.Partitions[0].HighWatermark >= uint64(total) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the output holds %d records, want %d", name, d.Partitions[0].HighWatermark, total)
			}
		}
	}

	cases := []struct{ name, plugin, param string }{
		{"pass", "map", "mode=pass"}, {"envelope", "envelope", ""}, {"upper", "map", "mode=map"},
	}
	runs := map[string][]run{}
	for round := range *throughputRounds {
		runs["plain"] = append(runs["plain"], measure(func() { scan() }))
		runs["filter"] = append(runs["filter"], measure(func() {
			scan(sdk.WithFilter("json", map[string]string{"field": "site", "equals": "lyon"}))
		}))
		for _, tc := range cases {
			name, to := fmt.Sprintf("%s-%d", tc.name, round), fmt.Sprintf("out-%s-%d", tc.name, round)
			if _, err := c.CreateTopic(ctx, to, t0); err != nil {
				t.Fatal(err)
			}
			var params []string
			if tc.param != "" {
				params = append(params, tc.param)
			}
			runs[tc.name] = append(runs[tc.name], measure(func() { transform(name, tc.plugin, to, params...) }))
			// The next round's figures are not the removal's.
			if err := c.RemoveTransform(ctx, name); err != nil {
				t.Fatal(err)
			}
			if err := c.DeleteTopic(ctx, to); err != nil {
				t.Fatal(err)
			}
		}
		var line strings.Builder
		for _, k := range []string{"plain", "filter", "pass", "envelope", "upper"} {
			r := runs[k][round]
			fmt.Fprintf(&line, "  %s %.0f rec/s %.2f cpu-µs/rec", k, float64(total)/r.wall.Seconds(),
				float64(r.cpu.Microseconds())/float64(total))
		}
		t.Logf("round %d:%s", round, line.String())
	}

	// Medians, and each transform's ratio to the filter by round.
	rate := func(r run) float64 { return float64(total) / r.wall.Seconds() }
	perCPU := func(r run) float64 { return float64(total) / r.cpu.Seconds() }
	t.Logf("%d records of 1 KiB, %d rounds; medians [min–max]:", total, *throughputRounds)
	for _, k := range []string{"plain", "filter", "pass", "envelope", "upper"} {
		var rs, cs, ratio, cpuRatio []float64
		for i, r := range runs[k] {
			rs, cs = append(rs, rate(r)), append(cs, float64(r.cpu.Microseconds())/float64(total))
			ratio = append(ratio, rate(r)/rate(runs["filter"][i]))
			cpuRatio = append(cpuRatio, perCPU(r)/perCPU(runs["filter"][i]))
		}
		t.Logf("  %-8s %s records/s, node %s cpu-µs/record; × filter: %s by records/s, %s by records/cpu-s",
			k, spread(rs, "%.0f"), spread(cs, "%.2f"), spread(ratio, "%.2f"), spread(cpuRatio, "%.2f"))
	}
}

// spread is the median of xs and its range, in format f.
func spread(xs []float64, f string) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", s[len(s)/2], s[0], s[len(s)-1])
}

// processTicks is the CPU time process pid used so far, user and system
// (all its threads), from /proc/PID/stat, in the kernel's clock ticks of
// 10 ms.
func processTicks(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// The fields after the command's name: state is the 3rd field of the
	// file, utime the 14th, stime the 15th.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
