package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/transport/wire"
)

// The life of a plugin across restarts: the compilation cache on the
// node's real file system, loading in the background while the node
// serves, quarantines kept until an operator clears them, and one strike
// per poll.

// wrappedDisk is the disk behind a wrapper, as serve runs the node (its
// metered file system); opening a plugin module waits for gate when one
// is set, so a test can hold the node's plugins in their loading.
type wrappedDisk struct {
	vfs.FS
	gate chan struct{}
}

func (w wrappedDisk) Unwrap() vfs.FS { return w.FS }

func (w wrappedDisk) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if w.gate != nil && strings.HasSuffix(name, ".wasm") {
		<-w.gate
	}
	return w.FS.Open(name, opts...)
}

func prefixWasm(t testing.TB) []byte {
	t.Helper()
	wasm, err := os.ReadFile("../plugins/testdata/prefix.wasm")
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

func prefixFilter() wire.Filter {
	return wire.Filter{Name: "prefix", Params: []wire.FilterParam{{Key: "prefix", Value: "temp"}}}
}

// hostileNode starts a node on dir whose plugins are compiled once for
// every run of the tests (a Go plugin takes seconds to compile), with the
// hostile plugin of the host's tests added as "hostile" unless the data
// directory has it.
// hostileFilter names the hostile plugin, doing what do says.
func hostileFilter(do string) wire.Filter {
	return wire.Filter{Name: "hostile", Params: []wire.FilterParam{{Key: "do", Value: do}}}
}

// hostileRestarts returns restart: it closes the node it started last, if
// any, starts another on dir (hostileNode, tweaked), waits for its plugins
// and dials it as the admin.
func hostileRestarts(t *testing.T, dir string, tweak func(*Config)) func() *client {
	var running *testNode
	return func() *client {
		t.Helper()
		if running != nil {
			if err := running.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		running = hostileNode(t, dir, tweak)
		if err := running.WaitPluginsLoaded(safetyContext(t)); err != nil {
			t.Fatal(err)
		}
		return running.mustDial(t, running.admin)
	}
}

func hostileNode(t *testing.T, dir string, tweak func(*Config)) *testNode {
	t.Helper()
	return startNode(t, nil, func(cfg *Config) {
		cfg.DataDir = dir
		if d, err := os.UserCacheDir(); err == nil {
			cfg.Plugins.CacheDir = filepath.Join(d, "ledge", "node-plugins-wazero")
		}
		if tweak != nil {
			tweak(cfg)
		}
	})
}

func pollFiltered(t *testing.T, c *client, f wire.Filter, topic string, partitions ...uint32) []wire.PollPartitionReply {
	t.Helper()
	req := &wire.PollRequest{Filter: f}
	for _, p := range partitions {
		req.Partitions = append(req.Partitions, wire.PollPartition{Topic: topic, Partition: p, Position: wire.Position{Mode: wire.PositionFirst}})
	}
	var rep wire.PollReply
	if err := c.call(c.main, req, &rep); err != nil {
		t.Fatalf("poll: %v", err)
	}
	return rep.Partitions
}

// pollJudged is pollFiltered for a poll whose filter must be judged (a
// spinning filter past its deadline). A plugin-busy answer says the
// filter could not finish within the poll's wait: on a loaded machine the
// poll's wait can run out before the call reaches its own, shorter
// deadline, and the call is abandoned, not judged, and counts no strike.
// Such a poll is sent again, as a client would.
func pollJudged(t *testing.T, c *client, f wire.Filter, topic string, partitions ...uint32) []wire.PollPartitionReply {
	t.Helper()
	ctx := safetyContext(t)
	for {
		got := pollFiltered(t, c, f, topic, partitions...)
		busy := slices.ContainsFunc(got, func(p wire.PollPartitionReply) bool { return p.Status == wire.StatusPluginBusy })
		if !busy || ctx.Err() != nil {
			return got
		}
		t.Logf("the poll filtered by %q was answered busy (%q); polling again", f.Name, got[0].Message)
	}
}

func pluginListed(t *testing.T, c *client, name string) wire.PluginInfo {
	t.Helper()
	var list wire.ListPluginsReply
	c.mustCall(&wire.ListPluginsRequest{}, &list)
	for _, p := range list.Plugins {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("plugin %q is not listed: %+v", name, list.Plugins)
	return wire.PluginInfo{}
}

// With the node's files on disk behind a wrapper (as serve runs it), the
// compiled module goes to the cache in the data directory: a restart
// loads it without compiling, and so does adding the same module again.
func TestPluginCompileCacheSkipsCompilingAfterARestart(t *testing.T) {
	dir := t.TempDir()
	onDisk := func(cfg *Config) { cfg.DataDir, cfg.FS = dir, wrappedDisk{FS: vfs.Default} }
	first := startNode(t, nil, onDisk)
	c := first.mustDial(t, first.admin)
	c.mustCall(&wire.AddPluginRequest{Name: "prefix", PluginKind: wire.PluginFilter, Module: prefixWasm(t)}, &wire.AddPluginReply{})
	if n := first.plugins.Host().Compiles(); n != 1 {
		t.Fatalf("adding a new module compiled %d modules, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(dir, PluginsCacheDir)); err != nil {
		t.Fatalf("no compilation cache in the data directory: %v", err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	second := startNode(t, nil, onDisk)
	if err := second.WaitPluginsLoaded(safetyContext(t)); err != nil {
		t.Fatal(err)
	}
	host := second.plugins.Host()
	if n := host.Compiles(); n != 0 {
		t.Fatalf("the restart compiled %d modules, want 0 (the cache has them)", n)
	}
	c = second.mustDial(t, second.admin)
	c.mustCall(&wire.RemovePluginRequest{Name: "prefix"}, &wire.RemovePluginReply{})
	c.mustCall(&wire.AddPluginRequest{Name: "prefix", PluginKind: wire.PluginFilter, Module: prefixWasm(t)}, &wire.AddPluginReply{})
	if n := host.Compiles(); n != 0 {
		t.Fatalf("adding a cached module compiled %d modules, want 0", n)
	}
	c.createTopic("t", wire.TopicConfig{Partitions: 1})
	if _, err := c.produce(c.main, "t", 0, ownertest.Batch(t, "temp 21", "rain")); err != nil {
		t.Fatal(err)
	}
	got := pollFiltered(t, c, prefixFilter(), "t", 0)[0]
	if got.Status != wire.StatusOK || !eq(values(t, got.Batches), []string{"0:temp 21"}) {
		t.Fatalf("filtered poll: %v %q %q", got.Status, got.Message, values(t, got.Batches))
	}
}

// After a restart the node serves at once while its plugins load: a poll
// naming a plugin still loading fails with the retryable plugin-loading
// status when it cannot wait, and a long poll waits for the plugin and
// is answered through it.
func TestPollNamingAPluginStillLoading(t *testing.T) {
	dir := t.TempDir()
	first := startNode(t, nil, func(cfg *Config) { cfg.DataDir = dir })
	c := first.mustDial(t, first.admin)
	c.createTopic("t", wire.TopicConfig{Partitions: 1})
	c.mustCall(&wire.AddPluginRequest{Name: "prefix", PluginKind: wire.PluginFilter, Module: prefixWasm(t)}, &wire.AddPluginReply{})
	added := pluginListed(t, c, "prefix").Added
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	gate := make(chan struct{})
	second := startNode(t, nil, func(cfg *Config) { cfg.DataDir, cfg.FS = dir, wrappedDisk{FS: vfs.Default, gate: gate} })
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the node's Close, which waits for the loader

	c = second.mustDial(t, second.admin)
	if _, err := c.produce(c.main, "t", 0, ownertest.Batch(t, "temp 21", "rain")); err != nil {
		t.Fatalf("produce while plugins load: %v", err)
	}
	if p := pluginListed(t, c, "prefix"); p.State != wire.PluginLoading || !p.Added.Equal(added) {
		t.Fatalf("listed while loading: state %v, added %v (want loading, %v)", p.State, p.Added, added)
	}
	var rep wire.PollReply
	err := c.call(c.main, &wire.PollRequest{Filter: prefixFilter(),
		Partitions: []wire.PollPartition{{Topic: "t", Position: wire.Position{Mode: wire.PositionFirst}}}}, &rep)
	if statusOfErr(err) != wire.StatusPluginLoading || !wire.StatusPluginLoading.Retryable() || !strings.Contains(err.Error(), `"prefix"`) {
		t.Fatalf("an immediate poll while the plugin loads: %v, want a retryable plugin-loading error naming it", err)
	}

	waiting := c.send(c.stream(), &wire.PollRequest{Filter: prefixFilter(), MaxWait: time.Minute,
		Partitions: []wire.PollPartition{{Topic: "t", Position: wire.Position{Mode: wire.PositionFirst}}}})
	release()
	r := <-waiting
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := decodeReply(r.frame, &rep); err != nil {
		t.Fatalf("a long poll while the plugin loads: %v", err)
	}
	if got := rep.Partitions[0]; got.Status != wire.StatusOK || !eq(values(t, got.Batches), []string{"0:temp 21"}) {
		t.Fatalf("a long poll while the plugin loads: %v %q %q", got.Status, got.Message, values(t, got.Batches))
	}
	if p := pluginListed(t, c, "prefix"); p.State != wire.PluginReady || !p.Added.Equal(added) {
		t.Fatalf("listed once loaded: state %v, added %v (want ok, %v)", p.State, p.Added, added)
	}
}

// heldPlugins restarts the node on dir with the loading of its plugins
// held (until the test ends), and reports on waiting each time a poll or
// a commit policy starts waiting for one of them.
func heldPlugins(t *testing.T, dir string) (tn *testNode, waiting <-chan string) {
	t.Helper()
	gate := make(chan struct{})
	tn = startNode(t, nil, func(cfg *Config) { cfg.DataDir, cfg.FS = dir, wrappedDisk{FS: vfs.Default, gate: gate} })
	t.Cleanup(func() { close(gate) }) // before the node's own Close
	ch := make(chan string, 1)
	hook := func(name string) {
		select {
		case ch <- name:
		default:
		}
	}
	tn.plugins.Awaiting.Store(&hook)
	return tn, ch
}

// closeWhileHeld closes tn while its plugins are still held loading, and
// fails unless Close returns (the loading is never released before).
func closeWhileHeld(t *testing.T, tn *testNode) <-chan error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- tn.Close(context.Background()) }()
	return closed
}

func mustReturn(t *testing.T, what string, closed <-chan error) {
	t.Helper()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-safetyContext(t).Done():
		t.Fatalf("%s: Close did not return while the plugin was still loading", what)
	}
}

func mustName(t *testing.T, waiting <-chan string, want string) {
	t.Helper()
	select {
	case name := <-waiting:
		if name != want {
			t.Fatalf("waiting for plugin %q, want %q", name, want)
		}
	case <-safetyContext(t).Done():
		t.Fatalf("nothing waits for plugin %q", want)
	}
}

// A long poll waiting for a plugin still loading does not hold a
// shutdown: Close answers it at once with the retryable plugin-loading
// status, saying the node is stopping, and returns though the plugin
// never finished loading (and the poll's minute is far from over).
func TestCloseAnswersAPollWaitingForAPluginStillLoading(t *testing.T) {
	dir := t.TempDir()
	first := startNode(t, nil, func(cfg *Config) { cfg.DataDir = dir })
	c := first.mustDial(t, first.admin)
	c.createTopic("t", wire.TopicConfig{Partitions: 1})
	c.mustCall(&wire.AddPluginRequest{Name: "prefix", PluginKind: wire.PluginFilter, Module: prefixWasm(t)}, &wire.AddPluginReply{})
	if _, err := c.produce(c.main, "t", 0, ownertest.Batch(t, "temp 21")); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	second, waiting := heldPlugins(t, dir)
	c = second.mustDial(t, second.admin)
	polled := c.send(c.stream(), &wire.PollRequest{Filter: prefixFilter(), MaxWait: time.Minute,
		Partitions: []wire.PollPartition{{Topic: "t", Position: wire.Position{Mode: wire.PositionFirst}}}})
	mustName(t, waiting, "prefix")

	closed := closeWhileHeld(t, second)
	r := <-polled
	err := r.err
	if err == nil {
		err = decodeReply(r.frame, &wire.PollReply{})
	}
	if statusOfErr(err) != wire.StatusPluginLoading || !wire.StatusPluginLoading.Retryable() || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("a poll waiting for its plugin at a shutdown: %v, want the retryable plugin-loading status saying the node stops", err)
	}
	mustReturn(t, "a poll waiting for its filter", closed)
}

// A commit policy waiting for its plugin to load does not hold a
// shutdown either: the poll that delivered the records is answered with
// them (nothing committed), and Close returns though the policy never
// finished loading.
func TestCloseEndsACommitPolicyWaitingToLoad(t *testing.T) {
	dir := t.TempDir()
	first := hostileNode(t, dir, nil)
	c := first.mustDial(t, first.admin)
	c.createTopic("frames", wire.TopicConfig{Partitions: 1})
	c.mustCall(&wire.AddPluginRequest{Name: "checkpoint", PluginKind: wire.PluginCommitPolicy,
		Module: buildPluginWasm(t, "../sdk/plugin/examples/checkpoint")}, &wire.AddPluginReply{})
	c.mustCall(&wire.AttachConsumerRequest{Name: "decoder"}, &wire.AttachConsumerReply{})
	c.mustCall(&wire.SetPolicyRequest{Name: "decoder", Policy: wire.Filter{Name: "checkpoint"}}, &wire.SetPolicyReply{})
	if _, err := c.produce(c.main, "frames", 0, checkpointBatch(t, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	second, waiting := heldPlugins(t, dir)
	c = second.mustDial(t, second.admin)
	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "decoder"}, &att)
	polled := c.send(c.stream(), &wire.PollRequest{Consumer: named("decoder", att.Session),
		Partitions: []wire.PollPartition{{Topic: "frames", Position: wire.Position{Mode: wire.PositionFirst}}}})
	mustName(t, waiting, "checkpoint")

	closed := closeWhileHeld(t, second)
	var rep wire.PollReply
	r := <-polled
	err := r.err
	if err == nil {
		err = decodeReply(r.frame, &rep)
	}
	if err != nil {
		t.Fatalf("the poll whose policy waits to load, at a shutdown: %v", err)
	}
	if got := rep.Partitions[0]; got.Status != wire.StatusOK || !eq(values(t, got.Batches), []string{"0:a", "1:b"}) {
		t.Fatalf("the poll whose policy waits to load, at a shutdown: %v %q %q", got.Status, got.Message, values(t, got.Batches))
	}
	mustReturn(t, "a commit policy waiting to load", closed)

	third := hostileNode(t, dir, nil)
	c = third.mustDial(t, third.admin)
	c.mustCall(&wire.AttachConsumerRequest{Name: "decoder"}, &att)
	var committed wire.GetCommittedReply
	c.mustCall(&wire.GetCommittedRequest{Consumer: named("decoder", att.Session),
		Partitions: []wire.TopicPartition{{Topic: "frames"}}}, &committed)
	if got := committed.Partitions[0]; got.HasOffset {
		t.Fatalf("the policy that never loaded committed %+v, want nothing (the records are read again)", got)
	}
}

// Adding a quarantined plugin's module again clears its quarantine for
// good: the record kept across restarts is cleared with it, whether the
// quarantine had been through a restart already or was just decided.
func TestReaddingAQuarantinedModuleClearsItAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	strict := func(cfg *Config) { cfg.Plugins.MaxStrikes = 1 }
	hostile := buildPluginWasm(t, "../plugins/testdata/hostile")
	spin, ok := hostileFilter("spin"), hostileFilter("ok")
	restart := hostileRestarts(t, dir, strict)
	readd := func(c *client) {
		t.Helper()
		var rep wire.AddPluginReply
		c.mustCall(&wire.AddPluginRequest{Name: "hostile", PluginKind: wire.PluginFilter, Module: hostile}, &rep)
		if rep.Plugin.State != wire.PluginReady {
			t.Fatalf("re-added: state %v %q, want ok", rep.Plugin.State, rep.Plugin.Reason)
		}
	}
	servesAfterARestart := func(when string) {
		t.Helper()
		c := restart()
		if p := pluginListed(t, c, "hostile"); p.State != wire.PluginReady || p.Quarantined {
			t.Fatalf("%s, after a restart: state %v %q, want ok", when, p.State, p.Reason)
		}
		if got := pollFiltered(t, c, ok, "t", 0)[0]; got.Status != wire.StatusOK || !eq(values(t, got.Batches), []string{"0:bait"}) {
			t.Fatalf("%s, a poll after a restart: %v %q", when, got.Status, got.Message)
		}
	}

	c := restart()
	c.createTopic("t", wire.TopicConfig{Partitions: 1})
	if _, err := c.produce(c.main, "t", 0, ownertest.Batch(t, "bait")); err != nil {
		t.Fatal(err)
	}
	readd(c)
	if got := pollJudged(t, c, spin, "t", 0)[0]; got.Status != wire.StatusPluginTimeout {
		t.Fatalf("the spinning poll: %v %q", got.Status, got.Message)
	}
	c = restart()
	if p := pluginListed(t, c, "hostile"); p.State != wire.PluginQuarantined {
		t.Fatalf("after a restart: state %v, want quarantined", p.State)
	}
	readd(c)
	servesAfterARestart("re-added after a restart in quarantine")

	c = restart()
	if got := pollJudged(t, c, spin, "t", 0)[0]; got.Status != wire.StatusPluginTimeout {
		t.Fatalf("the second spinning poll: %v %q", got.Status, got.Message)
	}
	readd(c) // at once: the quarantine's record may still be being written
	servesAfterARestart("re-added just after its quarantine")
}

// A poll over three partitions whose filter times out on the first fails
// every partition with the plugin-timeout status and counts one strike:
// the filter is not run again within the poll.
func TestFilterFailureIsOneStrikePerPoll(t *testing.T) {
	tn := hostileNode(t, t.TempDir(), func(cfg *Config) { cfg.Plugins.MaxStrikes = 2 })
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{Partitions: 3})
	for p := range uint32(3) {
		if _, err := c.produce(c.main, "t", p, ownertest.Batch(t, "bait")); err != nil {
			t.Fatal(err)
		}
	}
	c.mustCall(&wire.AddPluginRequest{Name: "hostile", PluginKind: wire.PluginFilter,
		Module: buildPluginWasm(t, "../plugins/testdata/hostile")}, &wire.AddPluginReply{})
	spin := hostileFilter("spin")

	for i, got := range pollJudged(t, c, spin, "t", 0, 1, 2) {
		if got.Status != wire.StatusPluginTimeout || !strings.Contains(got.Message, `"hostile"`) {
			t.Errorf("partition %d: %v %q, want a plugin timeout naming the plugin", i, got.Status, got.Message)
		}
	}
	if p := pluginListed(t, c, "hostile"); p.Timeouts != 1 || p.State != wire.PluginReady {
		t.Fatalf("after one poll over three partitions: %d timeouts, state %v (want 1, ok)", p.Timeouts, p.State)
	}
	if got := tn.Plugins().PluginStatuses()[0]; got.Strikes != 1 {
		t.Fatalf("after one poll: %d strikes, want 1", got.Strikes)
	}
	pollJudged(t, c, spin, "t", 0, 1, 2)
	if p := pluginListed(t, c, "hostile"); p.State != wire.PluginQuarantined {
		t.Fatalf("after two polls (MaxStrikes 2): state %v, want quarantined", p.State)
	}
}

// A quarantine and its reason are kept across restarts until an operator
// resets the plugin; the reset is kept too, and the plugin serves again.
func TestQuarantineSurvivesRestartsUntilReset(t *testing.T) {
	dir := t.TempDir()
	strict := func(cfg *Config) { cfg.Plugins.MaxStrikes = 1 }
	first := hostileNode(t, dir, strict)
	c := first.mustDial(t, first.admin)
	c.createTopic("t", wire.TopicConfig{Partitions: 1})
	if _, err := c.produce(c.main, "t", 0, ownertest.Batch(t, "bait")); err != nil {
		t.Fatal(err)
	}
	c.mustCall(&wire.AddPluginRequest{Name: "hostile", PluginKind: wire.PluginFilter,
		Module: buildPluginWasm(t, "../plugins/testdata/hostile")}, &wire.AddPluginReply{})
	added := pluginListed(t, c, "hostile").Added
	spin, ok := hostileFilter("spin"), hostileFilter("ok")
	if got := pollJudged(t, c, spin, "t", 0)[0]; got.Status != wire.StatusPluginTimeout {
		t.Fatalf("first poll: %v %q", got.Status, got.Message)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	restart := hostileRestarts(t, dir, strict)
	c = restart()
	p := pluginListed(t, c, "hostile")
	if p.State != wire.PluginQuarantined || !p.Quarantined || !strings.Contains(p.Reason, "deadline") || !p.Added.Equal(added) {
		t.Fatalf("after a restart: state %v, reason %q, added %v (want quarantined for its timeout, added %v)", p.State, p.Reason, p.Added, added)
	}
	got := pollFiltered(t, c, ok, "t", 0)[0]
	if got.Status != wire.StatusPluginQuarantined || !strings.Contains(got.Message, "deadline") {
		t.Fatalf("a poll after the restart: %v %q, want quarantined with its reason", got.Status, got.Message)
	}

	var reset wire.ResetPluginReply
	c.mustCall(&wire.ResetPluginRequest{Name: "hostile"}, &reset)
	if reset.Plugin.State != wire.PluginReady {
		t.Fatalf("after a reset: %+v", reset.Plugin)
	}
	c = restart()
	if p := pluginListed(t, c, "hostile"); p.State != wire.PluginReady {
		t.Fatalf("a reset plugin after a restart: state %v %q", p.State, p.Reason)
	}
	if got := pollFiltered(t, c, ok, "t", 0)[0]; got.Status != wire.StatusOK || !eq(values(t, got.Batches), []string{"0:bait"}) {
		t.Fatalf("a poll after the reset: %v %q", got.Status, got.Message)
	}
}

// Every failure of a filter has a status of its own, which a client
// surfaces whatever its class; only a momentarily full budget or pool and
// a plugin still loading are retryable. The message is the error's, which
// names the plugin.
func TestFilterFailuresMapToPluginStatuses(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want wire.Status
	}{
		{fmt.Errorf(`%w: "loop": ledge_filter ran past its deadline of 100ms`, plugins.ErrTimeout), wire.StatusPluginTimeout},
		{fmt.Errorf(`%w: "crash": ledge_filter: unreachable`, plugins.ErrTrap), wire.StatusPluginTrap},
		{fmt.Errorf(`%w: "bomb" grew past 64 MiB`, plugins.ErrMemoryLimit), wire.StatusPluginMemoryLimit},
		{fmt.Errorf(`%w: "liar": a bitmap of 3 bytes`, plugins.ErrInvalidAnswer), wire.StatusPluginInvalidAnswer},
		{fmt.Errorf(`%w: "picky": missing parameter`, plugins.ErrPluginFailed), wire.StatusPluginError},
		{fmt.Errorf(`%w: "loop" (failed 3 times)`, plugins.ErrQuarantined), wire.StatusPluginQuarantined},
		{fmt.Errorf(`%w: "hungry" needs 64 KiB: %w`, plugins.ErrMemoryBudget, context.DeadlineExceeded), wire.StatusPluginBusy},
		{fmt.Errorf(`%w: filter "busy" could not run: %w`, pluginreg.ErrBusy, context.DeadlineExceeded), wire.StatusPluginBusy},
		{fmt.Errorf(`%w: "site"`, pluginreg.ErrLoading), wire.StatusPluginLoading},
		{fmt.Errorf(`%w: "nope"`, plugins.ErrUnknownPlugin), wire.StatusUnknownPlugin},
	} {
		st, msg := StatusOf(tc.err)
		if st != tc.want || !st.IsPlugin() || msg != tc.err.Error() {
			t.Errorf("StatusOf(%v) = %v %q, want %v with the error's message", tc.err, st, msg, tc.want)
		}
		retryable := tc.want == wire.StatusPluginBusy || tc.want == wire.StatusPluginLoading
		if st.Retryable() != retryable {
			t.Errorf("%v: retryable %v, want %v", st, st.Retryable(), retryable)
		}
	}
}

// A filter whose memory growth the node's plugin budget refuses fails the
// poll at once with the retryable plugin-busy status naming the plugin,
// and counts no strike (the memory comes back as calls end).
func TestFilterRefusedByTheMemoryBudgetFailsThePoll(t *testing.T) {
	tn := hostileNode(t, t.TempDir(), func(cfg *Config) {
		cfg.Plugins.MemoryBudget = 16 << 20
		// The budget refuses the growth inside the call, whatever its
		// deadline; a long one keeps a loaded machine from cutting the
		// call before it has grown that far.
		cfg.Plugins.CallTimeout = time.Minute
	})
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{Partitions: 1})
	if _, err := c.produce(c.main, "t", 0, ownertest.Batch(t, "bait")); err != nil {
		t.Fatal(err)
	}
	c.mustCall(&wire.AddPluginRequest{Name: "hostile", PluginKind: wire.PluginFilter,
		Module: buildPluginWasm(t, "../plugins/testdata/hostile")}, &wire.AddPluginReply{})
	hoard := hostileFilter("alloc")
	got := pollFiltered(t, c, hoard, "t", 0)[0]
	if got.Status != wire.StatusPluginBusy || !got.Status.Retryable() || !strings.Contains(got.Message, `"hostile"`) {
		t.Fatalf("a filter past the memory budget: %v %q, want a retryable plugin-busy status naming it", got.Status, got.Message)
	}
	if st := tn.Plugins().PluginStatuses()[0]; st.Strikes != 0 || st.State != "ok" {
		t.Fatalf("after a budget refusal: %d strikes, state %s (want 0, ok)", st.Strikes, st.State)
	}
}
