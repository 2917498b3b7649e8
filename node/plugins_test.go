package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ledgemq/ledge/record"

	"github.com/ledgemq/ledge/transport/wire"
)

// buildPluginWasm builds a plugin package for wasip1 (the Go build cache
// keeps repeated runs fast).
func buildPluginWasm(t testing.TB, pkg string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain to build %s: %v", pkg, err)
	}
	out := filepath.Join(t.TempDir(), "plugin.wasm")
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

func checkpointBatch(t testing.TB, values ...string) []byte {
	t.Helper()
	var b record.BatchBuilder
	for _, v := range values {
		b.Append(record.Record{Timestamp: 1, Value: []byte(v), Headers: []record.Header{{Key: "checkpoint", Value: []byte("y")}}})
	}
	out, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A commit policy's proposal is a commit carrying the poll's token: when
// the partition is purged between the poll's completion and the commit,
// the proposal is stale and dropped; the next poll's proposal, made in
// the new history, is applied.
func TestCommitPolicyProposalFromStalePollIsDropped(t *testing.T) {
	tn := startNode(t, nil, func(cfg *Config) {
		// Compiling a Go plugin takes seconds; the cache keeps it across runs.
		if d, err := os.UserCacheDir(); err == nil {
			cfg.Plugins.CacheDir = filepath.Join(d, "ledge", "node-plugins-wazero")
		}
	})
	c := tn.mustDial(t, tn.admin)
	c.createTopic("frames", wire.TopicConfig{Partitions: 1})
	var added wire.AddPluginReply
	c.mustCall(&wire.AddPluginRequest{Name: "checkpoint", PluginKind: wire.PluginCommitPolicy,
		Module: buildPluginWasm(t, "../sdk/plugin/examples/checkpoint")}, &added)
	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "decoder"}, &att)
	c.mustCall(&wire.SetPolicyRequest{Name: "decoder", Policy: wire.Filter{Name: "checkpoint"}}, &wire.SetPolicyReply{})
	if _, err := c.produce(c.main, "frames", 0, checkpointBatch(t, "a", "b")); err != nil {
		t.Fatal(err)
	}
	committed := func() wire.Committed {
		var rep wire.GetCommittedReply
		c.mustCall(&wire.GetCommittedRequest{Consumer: named("decoder", att.Session),
			Partitions: []wire.TopicPartition{{Topic: "frames"}}}, &rep)
		return rep.Partitions[0]
	}

	var purged atomic.Int32
	purge := func() {
		purged.Add(1)
		c.mustCall(&wire.PurgeRequest{Topic: "frames", Partitions: []uint32{0}}, &wire.PurgeReply{})
	}
	tn.plugins.BeforePolicyCommit.Store(&purge)
	first := c.pollOne(c.stream(), named("decoder", att.Session), "frames", wire.Position{Mode: wire.PositionFirst}, 0)
	if first.Status != wire.StatusOK || len(values(t, first.Batches)) != 2 {
		t.Fatalf("first poll: %v %q, %d bytes", first.Status, first.Message, len(first.Batches))
	}
	if n := purged.Load(); n != 1 {
		t.Fatalf("the policy proposed %d times, want 1", n)
	}
	if got := committed(); got.HasOffset {
		t.Fatalf("a stale proposal was applied: committed %+v", got)
	}

	tn.plugins.BeforePolicyCommit.Store(nil)
	if _, err := c.produce(c.main, "frames", 0, checkpointBatch(t, "c")); err != nil {
		t.Fatal(err)
	}
	next := c.pollOne(c.stream(), named("decoder", att.Session), "frames", wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}, 0)
	if next.Status != wire.StatusOK || len(values(t, next.Batches)) != 1 {
		t.Fatalf("second poll: %v %q", next.Status, next.Message)
	}
	if got := committed(); !got.HasOffset || got.Offset != 3 {
		t.Fatalf("committed %+v, want offset 3 (through the checkpoint at 2)", got)
	}
	st := tn.Plugins().PluginStatuses()
	if len(st) != 1 || st[0].Name != "checkpoint" || st[0].Kind != "commit-policy" || st[0].Calls != 2 || st[0].State != "ok" {
		t.Fatalf("plugin statuses: %+v", st)
	}
}

// Plugin requests need the admin scope, and a poll naming an unknown
// filter is refused as a whole.
func TestPluginRequestsAreChecked(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{Partitions: 1})
	var rep wire.PollReply
	err := c.call(c.main, &wire.PollRequest{Filter: wire.Filter{Name: "nope"},
		Partitions: []wire.PollPartition{{Topic: "t", Position: wire.Position{Mode: wire.PositionFirst}}}}, &rep)
	if statusOfErr(err) != wire.StatusUnknownPlugin {
		t.Fatalf("poll with an unknown filter: %v", err)
	}
	err = c.call(c.main, &wire.AddPluginRequest{Name: "junk", PluginKind: wire.PluginFilter, Module: []byte("\x00asm")}, &wire.AddPluginReply{})
	if statusOfErr(err) != wire.StatusInvalidArgument {
		t.Fatalf("adding a truncated module: %v", err)
	}
	var list wire.ListPluginsReply
	c.mustCall(&wire.ListPluginsRequest{}, &list)
	if len(list.Plugins) != 0 {
		t.Fatalf("plugins after a refused add: %+v", list.Plugins)
	}
	var tok wire.CreateTokenReply
	c.mustCall(&wire.CreateTokenRequest{Label: "reader", Topic: "*", Scopes: wire.ScopeConsume}, &tok)
	reader := tn.mustDial(t, tok.Secret)
	if err := reader.call(reader.main, &wire.ListPluginsRequest{}, &list); statusOfErr(err) != wire.StatusForbidden {
		t.Fatalf("list-plugins without the admin scope: %v", err)
	}
}

// The status page and /metrics see the registry's plugins.
func TestPluginStatusesListRegisteredPlugins(t *testing.T) {
	tn := startNode(t, nil, nil)
	if got := tn.Plugins().PluginStatuses(); len(got) != 0 {
		t.Fatalf("a node without plugins lists %+v", got)
	}
}
