package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// TestRestartWithPlugins restarts `ledge serve` by SIGTERM with the three
// Go examples registered (jsonfilter, sample and checkpoint). Adding them
// compiled each once, into the compilation cache in the data directory
// (plugins-cache, which serve's own file system must not hide); every
// restart loads all three from it without compiling, as the node's
// "plugins loaded" line says, and lists them ok. It reports, for the
// restarts, the time from the exec to /readyz 200 and to that line
// (-lifecycle.runs 5 for the medians of docs/OPERATIONS.md).
func TestRestartWithPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary and three Go plugins")
	}
	ledge := newServedLedge(t, buildLedge(t), filepath.Join(t.TempDir(), "ledge-data"))
	ledge.start()
	defer ledge.checkNoPanic()
	ctx := testContext(t)
	c := ledge.dial(ctx)
	examples := []struct {
		name, pkg string
		kind      sdk.PluginKind
	}{
		{"site", jsonFilterPkg, sdk.PluginFilter},
		{"sample", samplePkg, sdk.PluginFilter},
		{"checkpoint", checkpointPkg, sdk.PluginCommitPolicy},
	}
	for _, ex := range examples {
		if _, err := c.AddPlugin(ctx, ex.name, ex.kind, buildPlugin(t, ex.pkg)); err != nil {
			t.Fatalf("adding %s: %v", ex.name, err)
		}
	}
	c.Close()
	if fi, err := os.Stat(filepath.Join(ledge.dir, node.PluginsCacheDir)); err != nil || !fi.IsDir() {
		t.Fatalf("no compilation cache in the data directory after adding three plugins: %v", err)
	}

	var loadedTimes []time.Duration // exec to "plugins loaded"
	for run := range *lifecycleRuns {
		ledge.stop(syscall.SIGTERM)
		ready := ledge.start()
		begun := ready.Add(-ledge.readyTimes[len(ledge.readyTimes)-1])
		line, seen := ledge.awaitPluginsLoaded(run + 1)
		loadedTimes = append(loadedTimes, seen.Sub(begun))
		if line.Plugins != len(examples) || line.Compiled != 0 {
			t.Fatalf("restart %d: %d plugins loaded with %d compiles, want %d with none (the cache has them)",
				run+1, line.Plugins, line.Compiled, len(examples))
		}
		listedOK(t, ledge, len(examples))
	}
	t.Logf("restart with three Go plugins, exec to /readyz 200: %s", median(ledge.readyTimes[1:]))
	t.Logf("restart with three Go plugins, exec to \"plugins loaded\": %s", median(loadedTimes))
}

// pluginsLoaded is the node's log line saying its plugins are loaded.
type pluginsLoaded struct {
	Msg      string `json:"msg"`
	Plugins  int    `json:"plugins"`
	Compiled int    `json:"compiled"`
}

// awaitPluginsLoaded waits for the node's nth "plugins loaded" line (one
// per start with plugins) and returns it, with when it was seen.
func (s *servedLedge) awaitPluginsLoaded(nth int) (pluginsLoaded, time.Time) {
	s.t.Helper()
	for deadline := time.Now().Add(safety); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		var found []pluginsLoaded
		sc := bufio.NewScanner(strings.NewReader(s.logs.String()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l pluginsLoaded
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "plugins loaded" {
				found = append(found, l)
			}
		}
		if len(found) >= nth {
			return found[nth-1], time.Now()
		}
	}
	s.t.Fatalf("no \"plugins loaded\" line for start %d\n%s", nth, s.logs.Tail(20))
	return pluginsLoaded{}, time.Time{}
}

// listedOK fails unless the node lists want plugins, all ok.
func listedOK(t *testing.T, s *servedLedge, want int) {
	t.Helper()
	ctx := testContext(t)
	c := s.dial(ctx)
	defer c.Close()
	list, err := c.ListPlugins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, p := range list {
		if p.State == "ok" {
			ok++
		}
	}
	if len(list) != want || ok != want {
		t.Fatalf("after a restart the node lists %+v, want %d plugins, all ok", list, want)
	}
}
