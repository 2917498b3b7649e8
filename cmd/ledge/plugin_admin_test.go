package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginsThroughCLI registers the JSON filter example, consumes
// through it, lists and removes it.
func TestPluginsThroughCLI(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain to build the example plugin: %v", err)
	}
	wasm := filepath.Join(t.TempDir(), "jsonfilter.wasm")
	build := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", wasm, "../../sdk/plugin/examples/jsonfilter")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg)
	}

	n := serve(t, t.TempDir())
	n.mustRun(t, "", "topic", "create", "readings")
	if out := n.mustRun(t, "", "plugin", "add", "site", wasm, "--kind", "filter"); !strings.Contains(out, "added site (filter") {
		t.Fatalf("plugin add printed %q", out)
	}
	n.mustRun(t, `{"site":"lyon","v":1}`+"\n"+`{"site":"oslo","v":2}`+"\n"+`{"site":"lyon","v":3}`+"\n", "produce", "readings")
	out := n.mustRun(t, "", "consume", "readings", "--filter", "site", "--param", "field=site", "--param", "equals=lyon")
	if out != `{"site":"lyon","v":1}`+"\n"+`{"site":"lyon","v":3}`+"\n" {
		t.Fatalf("consume through the filter printed %q", out)
	}
	if out := n.mustRun(t, "", "plugin", "list"); !strings.Contains(out, "site") || !strings.Contains(out, "filter") {
		t.Fatalf("plugin list:\n%s", out)
	}
	n.mustRun(t, "", "plugin", "remove", "site")
	_, errOut, err := n.run(t, "", "consume", "readings", "--filter", "site")
	if err == nil || !strings.Contains(errOut, "unknown plugin") {
		t.Fatalf("consume through a removed filter: err %v, stderr %q", err, errOut)
	}
}
