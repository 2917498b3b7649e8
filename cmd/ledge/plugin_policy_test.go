package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// A plugin author's whole path, in an empty directory outside any
// checkout: a filter and a commit policy from ledge plugin init are built
// and tested (Go with no module proxy and an empty module cache;
// AssemblyScript with its typed kit, the compiler from npm), added to a
// node, and used: the filter by consume --filter, the policy set on a
// group, where it governs the commits of a plain `ledge consume --group`
// (no flag); the consumer says so on stderr, and --commit-by-policy=false
// opts out.
func TestPluginProjectsOnANode(t *testing.T) {
	for _, lang := range []string{"go", "assemblyscript"} {
		t.Run(lang, func(t *testing.T) {
			if lang == "assemblyscript" {
				needTool(t, "node")
				needTool(t, "npm")
			}
			pluginProjectOnANode(t, lang)
		})
	}
}

func pluginProjectOnANode(t *testing.T, lang string) {
	dir := t.TempDir()
	for _, p := range []struct{ name, kind string }{{"only-errors", "filter"}, {"checkpoint", "commit-policy"}} {
		offlineRun(t, dir, "plugin", "init", p.name, "--kind", p.kind, "--lang", lang)
		offlineRun(t, dir, "plugin", "build", p.name)
		offlineRun(t, dir, "plugin", "test", p.name)
	}

	n := serve(t, dir)
	n.mustRun(t, "", "plugin", "add", "only-errors", filepath.Join("only-errors", "only-errors.wasm"), "--kind", "filter")
	n.mustRun(t, "", "plugin", "add", "checkpoint", filepath.Join("checkpoint", "checkpoint.wasm"), "--kind", "commit-policy")
	n.mustRun(t, "", "topic", "create", "logs")
	n.mustRun(t, `{"level":"error","msg":"disk full"}`+"\n"+`{"level":"info","msg":"ok"}`+"\n"+`{"level":"error","msg":"fan"}`+"\n", "produce", "logs")
	if out := n.mustRun(t, "", "consume", "logs", "--filter", "only-errors", "--param", "field=level", "--param", "equals=error"); out != `{"level":"error","msg":"disk full"}`+"\n"+`{"level":"error","msg":"fan"}`+"\n" {
		t.Errorf("consume --filter only-errors printed\n%s", out)
	}
	n.mustRun(t, "", "topic", "create", "frames")
	n.mustRun(t, "frame 1\nframe 2 checkpoint\nframe 3\nframe 4 checkpoint\nframe 5\n", "produce", "frames")
	committed := func(group string) uint64 {
		t.Helper()
		var d struct {
			Offsets []struct {
				Committed *uint64 `json:"committed"`
			} `json:"offsets"`
		}
		if err := json.Unmarshal([]byte(n.mustRun(t, "", "group", "describe", group, "--json")), &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Offsets) != 1 || d.Offsets[0].Committed == nil {
			return 0
		}
		return *d.Offsets[0].Committed
	}

	for _, c := range []struct {
		group   string
		flags   []string
		line    string // on stderr
		commits uint64
	}{
		{"decoders", nil, "ledge: group decoders: its commit policy checkpoint decides the commits", 4},
		{"raw", []string{"--commit-by-policy=false"}, "ledge: group raw: commits what is printed (at least once)", 5},
	} {
		n.mustRun(t, "", "group", "set-policy", c.group, "checkpoint", "--param", "marker=checkpoint")
		out, errOut, err := n.run(t, "", append([]string{"consume", "frames", "--group", c.group}, c.flags...)...)
		if err != nil {
			t.Fatalf("consume --group %s: %v\n%s", c.group, err, errOut)
		}
		if strings.Count(out, "\n") != 5 {
			t.Errorf("consume --group %s printed %q, want the 5 frames", c.group, out)
		}
		if !strings.Contains(errOut, c.line) {
			t.Errorf("consume --group %s said\n%s\nwant a line %q", c.group, errOut, c.line)
		}
		if got := committed(c.group); got != c.commits {
			t.Errorf("group %s committed %d, want %d", c.group, got, c.commits)
		}
	}
	// The next member of the policy's group resumes after the last
	// checkpoint.
	if out := n.mustRun(t, "", "consume", "frames", "--group", "decoders"); out != "frame 5\n" {
		t.Errorf("the second consume of decoders printed %q, want frame 5", out)
	}
}
