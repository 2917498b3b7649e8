package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
	"github.com/ledgemq/ledge/transport/wire"
)

// Plugins end to end: each example plugin registered over QUIC with the
// SDK and used by a consumer through the node; a hostile plugin that
// never returns, used by one consumer while other clients keep being
// served.

// wasmModules builds plugin packages for wasip1 once per test binary (the
// Go build cache keeps repeated runs fast).
var wasmModules sync.Map // package path → *builtWasm

type builtWasm struct {
	once sync.Once
	wasm []byte
	err  error
}

func buildPlugin(t testing.TB, pkg string) []byte {
	t.Helper()
	v, _ := wasmModules.LoadOrStore(pkg, &builtWasm{})
	b := v.(*builtWasm)
	b.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			b.err = fmt.Errorf("no go toolchain to build %s: %w", pkg, err)
			return
		}
		dir, err := os.MkdirTemp("", "ledge-e2e-plugin-")
		if err != nil {
			b.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "plugin.wasm")
		cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
			return
		}
		b.wasm, b.err = os.ReadFile(out)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.wasm
}

const (
	jsonFilterPkg = "../../sdk/plugin/examples/jsonfilter"
	samplePkg     = "../../sdk/plugin/examples/sample"
	checkpointPkg = "../../sdk/plugin/examples/checkpoint"
	hostilePkg    = "../../plugins/testdata/hostile"
)

// pluginNode starts a node whose plugin compilation cache is kept across
// test runs (compiling a Go plugin takes seconds; loading it from the
// cache, milliseconds).
func pluginNode(t testing.TB, tweak func(*node.Config)) *node.Node {
	t.Helper()
	return startNode(t, func(cfg *node.Config) {
		if d, err := os.UserCacheDir(); err == nil {
			cfg.Plugins.CacheDir = filepath.Join(d, "ledge", "e2e-plugins-wazero")
		}
		if tweak != nil {
			tweak(cfg)
		}
	})
}

func produce(t testing.TB, c *sdk.Client, topic string, recs ...*sdk.Record) {
	t.Helper()
	ctx := testContext(t)
	p, err := c.NewProducer(ctx, topic, sdk.WithPartitioner(sdk.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// drain polls until a poll returns nothing, returning every record.
func drain(t testing.TB, cons *sdk.Consumer) []*sdk.Record {
	t.Helper()
	var all []*sdk.Record
	for {
		rs, err := cons.Poll(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			return all
		}
		all = append(all, rs...)
	}
}

func TestPluginJSONFilter(t *testing.T) {
	n := pluginNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "readings", sdk.TopicConfig{Partitions: 1})
	info, err := c.AddPlugin(ctx, "site", sdk.PluginFilter, buildPlugin(t, jsonFilterPkg))
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "site" || info.Kind != sdk.PluginFilter || len(info.Digest) != 64 {
		t.Fatalf("AddPlugin: %+v", info)
	}
	var recs []*sdk.Record
	for i := range 100 {
		site := []string{"lyon", "oslo"}[i%2]
		recs = append(recs, &sdk.Record{Value: fmt.Appendf(nil, `{"site":%q,"n":%d}`, site, i)})
	}
	produce(t, c, "readings", recs...)

	cons, err := c.NewConsumer(ctx, "readings", sdk.WithConsumerName("lyon-only"), sdk.WithMaxWait(0),
		sdk.WithFilter("site", map[string]string{"field": "site", "equals": "lyon"}))
	if err != nil {
		t.Fatal(err)
	}
	var got []*sdk.Record
	for {
		rs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			break
		}
		got = append(got, rs...)
		// The position moved past the dropped records: committing a poll
		// commits through the end of what it covered.
		if err := cons.CommitPolled(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 50 {
		t.Fatalf("filter kept %d records, want 50", len(got))
	}
	for _, r := range got {
		if !strings.Contains(string(r.Value), `"lyon"`) || r.Offset%2 != 0 {
			t.Fatalf("unexpected record %d: %s", r.Offset, r.Value)
		}
	}
	// The last record, 99, was dropped; the commit is past it all the same.
	committed, err := cons.Committed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != 1 || committed[0].Offset != 100 {
		t.Fatalf("committed %+v, want offset 100", committed)
	}
	list, err := c.ListPlugins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].RecordsIn != 100 || list[0].RecordsOut != 50 {
		t.Fatalf("ListPlugins: %+v", list)
	}
}

func TestPluginSampleFilter(t *testing.T) {
	n := pluginNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "metrics", sdk.TopicConfig{Partitions: 1})
	if _, err := c.AddPlugin(ctx, "tenth", sdk.PluginFilter, buildPlugin(t, samplePkg)); err != nil {
		t.Fatal(err)
	}
	var recs []*sdk.Record
	for i := range 200 {
		recs = append(recs, &sdk.Record{Value: fmt.Appendf(nil, "m%d", i)})
	}
	produce(t, c, "metrics", recs...)
	cons, err := c.NewConsumer(ctx, "metrics", sdk.WithMaxWait(0), sdk.WithFilter("tenth", map[string]string{"every": "10"}))
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, cons)
	if len(got) != 20 {
		t.Fatalf("sample kept %d of 200 records, want 20", len(got))
	}
	for i, r := range got {
		if r.Offset != uint64(10*i) || string(r.Value) != fmt.Sprintf("m%d", 10*i) {
			t.Fatalf("record %d: offset %d value %s", i, r.Offset, r.Value)
		}
	}
}

func TestPluginCheckpointPolicy(t *testing.T) {
	n := pluginNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "frames", sdk.TopicConfig{Partitions: 1})
	if _, err := c.AddPlugin(ctx, "checkpoint", sdk.PluginCommitPolicy, buildPlugin(t, checkpointPkg)); err != nil {
		t.Fatal(err)
	}
	var recs []*sdk.Record
	for i := range 10 {
		r := &sdk.Record{Value: fmt.Appendf(nil, "f%d", i)}
		if i == 3 || i == 6 {
			r.Headers = []sdk.Header{{Key: "checkpoint", Value: []byte("end")}}
		}
		recs = append(recs, r)
	}
	produce(t, c, "frames", recs...)
	cons, err := c.NewConsumer(ctx, "frames", sdk.WithConsumerName("decoder"), sdk.WithMaxWait(0),
		sdk.WithCommitPolicy("checkpoint", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, cons); len(got) != 10 {
		t.Fatalf("consumed %d records, want 10", len(got))
	}
	committed, err := cons.Committed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The policy commits through the last checkpoint it saw: offset 6.
	if len(committed) != 1 || !committed[0].Committed || committed[0].Offset != 7 {
		t.Fatalf("committed %+v, want offset 7 (through the checkpoint at 6)", committed)
	}
	// A filter is not a commit policy, and the reverse.
	if err := c.SetCommitPolicy(ctx, "decoder", "missing", nil); !isStatus(err, wire.StatusUnknownPlugin) {
		t.Fatalf("SetCommitPolicy of an unknown plugin: %v", err)
	}
}

func isStatus(err error, s wire.Status) bool {
	var e *sdk.Error
	return errors.As(err, &e) && e.Status == s
}

func TestPluginRegistrySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	first := pluginNode(t, func(cfg *node.Config) { cfg.DataDir = dir })
	c := dial(t, first)
	ctx := testContext(t)
	wasm := buildPlugin(t, jsonFilterPkg)
	if _, err := c.AddPlugin(ctx, "site", sdk.PluginFilter, wasm); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddPlugin(ctx, "gone", sdk.PluginFilter, wasm); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePlugin(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePlugin(ctx, "gone"); !isStatus(err, wire.StatusUnknownPlugin) {
		t.Fatalf("removing twice: %v", err)
	}
	_ = c.Close()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	second := pluginNode(t, func(cfg *node.Config) { cfg.DataDir = dir })
	list, err := dial(t, second).ListPlugins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "site" {
		t.Fatalf("after a restart: %+v", list)
	}
}

// A filter that never returns is cut off at its deadline: each poll
// through it fails at once with an error naming the plugin and the cause
// (never an empty poll), counts a strike, and the third quarantines it;
// meanwhile a producer and another consumer keep being served on another
// partition, and the node stays up.
func TestPluginHostileFilterDoesNotStallTheNode(t *testing.T) {
	n := pluginNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "mixed", sdk.TopicConfig{Partitions: 2})
	if _, err := c.AddPlugin(ctx, "spin", sdk.PluginFilter, buildPlugin(t, hostilePkg)); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "mixed", &sdk.Record{Partition: 0, Value: []byte("bait")})

	hostile := dial(t, n)
	spinner, err := hostile.NewConsumer(ctx, "mixed", sdk.WithPartitions(0), sdk.WithMaxWait(0), sdk.WithPrefetch(false),
		sdk.WithFilter("spin", map[string]string{"do": "spin"}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var timeouts []error
	go func() {
		for {
			rs, err := spinner.Poll(ctx)
			if errors.Is(err, sdk.ErrPluginTimeout) {
				timeouts = append(timeouts, err)
				continue
			}
			if err != nil || len(rs) > 0 {
				done <- err
				return
			}
		}
	}()

	p, err := c.NewProducer(ctx, "mixed", sdk.WithPartitioner(sdk.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.NewConsumer(ctx, "mixed", sdk.WithPartitions(1), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	rounds, served := 0, 0
	var hostileErr error
	for running := true; running; rounds++ {
		select {
		case hostileErr = <-done:
			running = false
		default:
		}
		if err := p.ProduceSync(ctx, &sdk.Record{Partition: 1, Value: fmt.Appendf(nil, "r%d", rounds)}); err != nil {
			t.Fatal(err)
		}
		for got := 0; got == 0; {
			rs, err := other.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = len(rs)
			served += got
		}
	}
	if served != rounds {
		t.Fatalf("served %d records in %d rounds", served, rounds)
	}
	if rounds < 2 {
		t.Fatalf("the other clients made no progress while the hostile filter ran (%d rounds)", rounds)
	}
	if len(timeouts) != 3 {
		t.Fatalf("%d polls failed with a plugin timeout before the quarantine, want 3 (MaxStrikes): %v", len(timeouts), timeouts)
	}
	if first := timeouts[0]; !strings.Contains(first.Error(), `"spin"`) || !strings.Contains(first.Error(), "deadline") || sdk.IsRetryable(first) {
		t.Fatalf("the first poll's error %q: want the plugin's name and its deadline, not retryable", first)
	}
	if !errors.Is(hostileErr, sdk.ErrPluginQuarantined) || !strings.Contains(hostileErr.Error(), "deadline") {
		t.Fatalf("hostile consumer: %v, want a quarantine error with its reason", hostileErr)
	}
	list, err := c.ListPlugins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Timeouts == 0 || !list[0].Quarantined {
		t.Fatalf("plugin stats: %+v", list)
	}
	if _, err := c.ListTopics(ctx); err != nil {
		t.Fatalf("node after the hostile plugin: %v", err)
	}
}
