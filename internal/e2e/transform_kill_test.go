package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

const mapTransformPkg = "../../plugins/testdata/maptransform"

// honestPluginDeadline is the plugin call deadline of a served node whose
// test is not about deadlines: long enough that a loaded machine never
// cuts off an honest call (the default is 100 ms).
const honestPluginDeadline = "LEDGE_PLUGINS_CALL_TIMEOUT=10s"

// honestCallTimeout is honestPluginDeadline for a node started in the
// test's process.
const honestCallTimeout = 10 * time.Second

// TestTransformSurvivesTwoKills: 20,000 records of 1 KiB go through a
// pass-through transform plugin from one durability "always" topic to
// another while the ledge binary is SIGKILLed twice: every input record is
// in the output exactly once, and each output partition holds its input
// partition's records in their order.
//
// covers: G90
func TestTransformSurvivesTwoKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	const (
		total = 20000
		parts = 2
	)
	bin := buildLedge(t)
	wasm := buildPlugin(t, mapTransformPkg)
	begun := time.Now()
	node := newServedLedge(t, bin, filepath.Join(t.TempDir(), "ledge-data"))
	// What is tested is the kills, not the plugin's deadline: on a loaded
	// machine an honest call can miss 100 ms, and three misses would
	// quarantine the plugin.
	node.env = append(node.env, honestPluginDeadline)
	node.start()
	defer node.checkNoPanic()
	ctx := context.Background()
	c := node.dial(ctx)
	for _, topic := range []string{"raw", "clean"} {
		if _, err := c.CreateTopic(ctx, topic, sdk.TopicConfig{Partitions: parts, Durability: sdk.DurabilityAlways}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AddPlugin(ctx, "pass", sdk.PluginTransform, wasm); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "raw")
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 1000)
	for i := range total {
		p.Produce(ctx, &sdk.Record{Key: fmt.Appendf(nil, "k%d", i%97), Value: fmt.Appendf(nil, "%05d %s", i, pad)}, nil)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	t.Logf("%v: %d records in", time.Since(begun).Round(time.Millisecond), total)

	if out, err := node.client("transform", "add", "copy", "--plugin", "pass", "--from", "raw", "--to", "clean",
		"--param", "mode=pass").CombinedOutput(); err != nil {
		t.Fatalf("ledge transform add: %v\n%s", err, out)
	}
	waitOut := func(n uint64) uint64 {
		t.Helper()
		deadline := time.Now().Add(safety)
		for {
			got := topicRecords(ctx, t, node, "clean")
			if got >= n {
				return got
			}
			if time.Now().After(deadline) {
				out, _ := node.client("transform", "status", "copy").CombinedOutput()
				t.Fatalf("the output holds %d records, want at least %d\n%s\n%s", got, n, out, node.logs.Tail(20))
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, at := range []uint64{4321, 12345} {
		got := waitOut(at)
		node.stop(syscall.SIGKILL)
		t.Logf("%v: killed with %d records out", time.Since(begun).Round(time.Millisecond), got)
		node.start()
	}
	waitOut(total)
	t.Logf("%v: all %d records out", time.Since(begun).Round(time.Millisecond), total)

	out, err := node.client("transform", "status", "copy").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "running") {
		t.Fatalf("ledge transform status: %v\n%s", err, out)
	}
	t.Logf("ledge transform status copy:\n%s", out)

	c = node.dial(ctx)
	defer c.Close()
	in, outRecs := byPartition(readAll(ctx, t, c, "raw")), byPartition(readAll(ctx, t, c, "clean"))
	n := 0
	for i := range parts {
		if !slices.Equal(in[int32(i)], outRecs[int32(i)]) {
			t.Fatalf("partition %d: the output (%d records) is not the input (%d records), once each and in order",
				i, len(outRecs[int32(i)]), len(in[int32(i)]))
		}
		n += len(outRecs[int32(i)])
	}
	if n != total {
		t.Fatalf("%d records out, want %d", n, total)
	}

	// The status page's JSON and the metrics say the same.
	var st struct {
		Transforms []struct {
			Name, State string
			RecordsOut  uint64 `json:"records_out"`
			Partitions  []struct{ Committed, Lag uint64 }
		}
	}
	if err := json.Unmarshal([]byte(get(t, node, "/api/status")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Transforms) != 1 || st.Transforms[0].Name != "copy" || st.Transforms[0].State != "running" ||
		len(st.Transforms[0].Partitions) != parts {
		t.Fatalf("/api/status transforms: %+v", st.Transforms)
	}
	for _, p := range st.Transforms[0].Partitions {
		if p.Lag != 0 {
			t.Fatalf("/api/status transforms: %+v, want no lag", st.Transforms)
		}
	}
	wantMetric(t, node, `ledge_transform_lag_records{partition="0",transform="copy"}`, "0")

	// The rest of the CLI: list, pause (it shows), resume, remove.
	for _, step := range []struct {
		args []string
		says string
	}{
		{[]string{"transform", "list"}, "copy"},
		{[]string{"transform", "pause", "copy"}, "transform copy paused"},
		{[]string{"transform", "status", "copy"}, "paused"},
		{[]string{"transform", "resume", "copy"}, "transform copy resumed"},
		{[]string{"transform", "remove", "copy"}, "transform copy removed"},
	} {
		out, err := node.client(step.args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), step.says) {
			t.Fatalf("ledge %s: %v\n%s", strings.Join(step.args, " "), err, out)
		}
	}
	if out, err := node.client("transform", "status", "copy").CombinedOutput(); err == nil {
		t.Fatalf("status of a removed transform succeeded:\n%s", out)
	}
}

// topicRecords is how many records a topic of the node holds.
func topicRecords(ctx context.Context, t *testing.T, node *servedLedge, topic string) uint64 {
	t.Helper()
	c := node.dial(ctx)
	defer c.Close()
	desc, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, p := range desc.Partitions {
		n += p.HighWatermark - p.StartOffset - p.Skipped
	}
	return n
}

// byPartition groups records' keys and values ("key=value") by partition,
// in offset order.
func byPartition(recs []*sdk.Record) map[int32][]string {
	out := map[int32][]string{}
	for _, r := range recs {
		out[r.Partition] = append(out[r.Partition], string(r.Key)+"="+string(r.Value))
	}
	return out
}
