package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildWasm builds a plugin package for wasip1.
func buildWasm(t *testing.T, pkg string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain to build the plugin: %v", err)
	}
	wasm := filepath.Join(t.TempDir(), filepath.Base(pkg)+".wasm")
	build := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", wasm, pkg)
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg)
	}
	return wasm
}

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
	if out := n.mustRun(t, "", "plugin", "add", "site", wasm, "--kind", "filter"); !regexp.MustCompile(`^added site \(filter, \d+\.\d MiB, sha256 [0-9a-f]{64}\)\n$`).MatchString(out) {
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
	if out := n.mustRun(t, "", "plugin", "list"); !regexp.MustCompile(`site\s+filter\s+\d+\.\d MiB\s`).MatchString(out) {
		t.Errorf("plugin list shows the size in bytes, not MiB:\n%s", out)
	}
	// The filter's own error, a missing parameter, is a flag to add.
	_, errOut, err := n.run(t, "", "consume", "readings", "--filter", "site", "--param", "field=site")
	if want := `ledge: plugin site needs --param equals=VALUE (it said: ledge_init: missing parameter "equals")` + "\n"; err == nil || errOut != want {
		t.Errorf("consume without a parameter: err %v, stderr %q, want %q", err, errOut, want)
	}
	n.mustRun(t, "", "plugin", "remove", "site")
	_, errOut, err = n.run(t, "", "consume", "readings", "--filter", "site")
	if err == nil || !strings.Contains(errOut, "plugin site does not exist") {
		t.Fatalf("consume through a removed filter: err %v, stderr %q", err, errOut)
	}
}

// A filter that loops forever: every consume through it exits with status
// 1 and the plugin's name and cause on stderr, from the first call, and
// prints no record; the third strike quarantines it, which the next
// consume says, with the reason. "plugin list" shows the quarantine and
// "plugin reset" clears it.
func TestPluginFailuresThroughCLI(t *testing.T) {
	wasm := buildWasm(t, "../../plugins/testdata/hostile")
	n := serve(t, t.TempDir())
	n.mustRun(t, "", "topic", "create", "T")
	n.mustRun(t, "bait\n", "produce", "T")
	n.mustRun(t, "", "plugin", "add", "loop", wasm, "--kind", "filter")

	consume := func() (string, string, int) {
		t.Helper()
		out, errOut, err := n.run(t, "", "consume", "T", "--filter", "loop", "--param", "do=spin", "-n", "5")
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("consume through a looping filter: %v, want a non-zero exit\nstdout %q\nstderr %q", err, out, errOut)
		}
		return out, errOut, exit.ExitCode()
	}
	for i := range 3 {
		out, errOut, code := consume()
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "ledge: plugin loop timed out on T/0: ledge_filter ran past its deadline of ") {
			t.Fatalf("consume %d: exit %d, stdout %q, stderr %q: want exit 1, nothing printed, the plugin's timeout on stderr", i+1, code, out, errOut)
		}
	}
	if out, errOut, code := consume(); code != 1 || out != "" || !strings.HasPrefix(errOut, "ledge: plugin loop is quarantined (failed 3 times") ||
		!strings.Contains(errOut, "deadline") || !strings.HasSuffix(errOut, ": ledge plugin reset loop clears it, as does adding its module again\n") {
		t.Fatalf("consume after three timeouts: exit %d, stdout %q, stderr %q: want the quarantine and its reason", code, out, errOut)
	}
	if out := n.mustRun(t, "", "plugin", "list"); !strings.Contains(out, "quarantined") || !strings.Contains(out, "failed 3 times") {
		t.Fatalf("plugin list after the quarantine:\n%s", out)
	}
	if out := n.mustRun(t, "", "plugin", "reset", "loop"); !strings.Contains(out, "reset loop (ok)") {
		t.Fatalf("plugin reset printed %q", out)
	}
	if out := n.mustRun(t, "", "consume", "T", "--filter", "loop", "--param", "do=ok", "-n", "1"); out != "bait\n" {
		t.Fatalf("consume after the reset printed %q", out)
	}
}

// A transform is registered and listed like the other kinds; a poll
// cannot use it as a filter.
func TestPluginAddTransform(t *testing.T) {
	wasm := buildWasm(t, "../../sdk/plugin/examples/perminute")
	dir := t.TempDir()
	n := serve(t, dir)
	n.mustRun(t, "", "topic", "create", "readings")
	if out := n.mustRun(t, "", "plugin", "add", "perminute", wasm, "--kind", "transform"); !regexp.MustCompile(`^added perminute \(transform, \d+\.\d MiB, sha256 [0-9a-f]{64}\)\n$`).MatchString(out) {
		t.Fatalf("plugin add printed %q", out)
	}
	if out := n.mustRun(t, "", "plugin", "list"); !regexp.MustCompile(`perminute\s+transform\s`).MatchString(out) {
		t.Fatalf("plugin list:\n%s", out)
	}
	n.mustRun(t, `{"v":1}`+"\n", "produce", "readings")
	if _, errOut, err := n.run(t, "", "consume", "readings", "--filter", "perminute"); err == nil || !strings.Contains(errOut, "transform") {
		t.Errorf("a transform used as a filter: err %v, stderr %q", err, errOut)
	}
	// A filter module is not a transform.
	if _, errOut, err := n.run(t, "", "plugin", "add", "site", buildWasm(t, "../../sdk/plugin/examples/jsonfilter"), "--kind", "transform"); err == nil || !strings.Contains(errOut, "transform") {
		t.Errorf("a filter added as a transform: err %v, stderr %q", err, errOut)
	}
}
