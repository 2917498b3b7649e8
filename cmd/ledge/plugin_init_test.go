package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// needTool skips a test when a tool it needs is missing, except in CI
// (CI set), where a missing tool is a failure: CI installs it.
func needTool(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; CI must install it (%s)", tool, installHint(tool))
		}
		t.Skipf("%s is not installed (%s)", tool, installHint(tool))
	}
}

// pluginProjectRun runs the ledge binary in dir, pointing Go projects at
// this checkout.
func pluginProjectRun(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*safety)
	defer cancel()
	cmd := ledgeCmd(ctx, args...)
	cmd.Dir = dir
	src, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, "LEDGE_SOURCE="+src)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A project from ledge plugin init builds, and its module gives the
// verdicts its sample records expect, in each language and kind.
func testPluginProject(t *testing.T, lang string) {
	for _, kind := range []string{"filter", "commit-policy", "transform"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			name := "p-" + kind
			for _, args := range [][]string{
				{"plugin", "init", name, "--kind", kind, "--lang", lang},
				{"plugin", "build", name},
			} {
				if out, err := pluginProjectRun(t, dir, args...); err != nil {
					t.Fatalf("ledge %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			out, err := pluginProjectRun(t, dir, "plugin", "test", name)
			if err != nil {
				t.Fatalf("ledge plugin test: %v\n%s", err, out)
			}
			want := "ok: 6 verdicts as"
			switch kind {
			case "commit-policy":
				want = "ok: 1 proposal as"
			case "transform":
				// The template passes every record through unchanged.
				want = "ok: the outputs of 4 records as"
			}
			if !strings.Contains(out, want) {
				t.Errorf("ledge plugin test printed\n%s\nwant %q", out, want)
			}
			if kind == "transform" {
				// An output that differs from the one expected fails the
				// test, naming the record; one expected but not given too.
				records := `{"key": "a", "value": {"n": 1}, "outputs": [{"key": "a", "value": {"n": 2}}]}` + "\n" +
					`{"key": "b", "value": "x"}` + "\n" +
					`{"key": "c", "value": "y", "outputs": [{"key": "c", "value": "y"}, {"key": "c", "value": "y"}]}` + "\n"
				if err := os.WriteFile(filepath.Join(dir, name, "records.jsonl"), []byte(records), 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := pluginProjectRun(t, dir, "plugin", "test", name)
				if err == nil || !strings.Contains(out, "3 of the outputs of 3 records differ") ||
					!strings.Contains(out, "<- expected other outputs") || !strings.Contains(out, "<- expected 0 outputs") ||
					!strings.Contains(out, "<- expected 2 outputs") {
					t.Errorf("ledge plugin test with wrong outputs: %v\n%s", err, out)
				}
			}
		})
	}
}

func TestPluginProjectGo(t *testing.T) { testPluginProject(t, "go") }

func TestPluginProjectWAT(t *testing.T) {
	needTool(t, "wat2wasm")
	testPluginProject(t, "wat")
}

func TestPluginProjectAssemblyScript(t *testing.T) {
	needTool(t, "node") // npm runs the compiler, asc, with node
	needTool(t, "npm")
	testPluginProject(t, "assemblyscript")
}

// The AssemblyScript kit's typed records decide beyond the host's
// matchers: the examples of sdk/plugin/assemblyscript/examples (a JSON
// number comparison per record; a commit policy reading headers, keys
// and offsets and keeping state) and testdata/kitcheck, which calls every
// function of the kit (asc compiles only what is used), each built in a
// project from init.
func TestPluginAssemblyScriptTypedRecords(t *testing.T) {
	needTool(t, "node")
	needTool(t, "npm")
	for _, ex := range []struct {
		dir, kind string
		params    map[string]string
		want      string
	}{
		{"examples/above", "filter", map[string]string{"min": "30", "unit": "C"}, "ok: 7 verdicts as"},
		{"examples/checkpoint", "commit-policy", map[string]string{}, "ok: 1 proposal as"},
		{"testdata/kitcheck", "filter", map[string]string{"n": "7", "x": "2.5", "flag": "true", "site": "lyon"}, "ok: 7 verdicts as"},
		{"examples/tally", "transform", map[string]string{}, "ok: the outputs of 6 records as"},
	} {
		name := path.Base(ex.dir)
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if out, err := pluginProjectRun(t, dir, "plugin", "init", name, "--kind", ex.kind, "--lang", "assemblyscript"); err != nil {
				t.Fatalf("ledge plugin init: %v\n%s", err, out)
			}
			project := filepath.Join(dir, name)
			example := filepath.Join("../../sdk/plugin/assemblyscript", ex.dir)
			for from, to := range map[string]string{"index.ts": "assembly/index.ts", "records.jsonl": "records.jsonl"} {
				b, err := os.ReadFile(filepath.Join(example, from))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(project, to), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			manifest := filepath.Join(project, projectFile)
			b, err := os.ReadFile(manifest)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			m["params"] = ex.params
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(manifest, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := pluginProjectRun(t, project, "plugin", "build"); err != nil {
				t.Fatalf("ledge plugin build: %v\n%s", err, out)
			}
			out, err := pluginProjectRun(t, project, "plugin", "test")
			if err != nil || !strings.Contains(out, ex.want) {
				t.Fatalf("ledge plugin test: %v\n%s\nwant %q", err, out, ex.want)
			}
			if name == "checkpoint" {
				// With value=yes the policy passes over the record whose
				// checkpoint header is null (the expected commit) and
				// commits through the one marked yes.
				out, err := pluginProjectRun(t, project, "plugin", "test", "--param", "value=yes")
				if err == nil || !strings.Contains(out, "commit through 101") {
					t.Errorf("ledge plugin test --param value=yes: %v\n%s\nwant a commit through 101, not the expected one", err, out)
				}
			}
			if name == "tally" {
				// The counts travel from batch to batch in the state.
				out, err := pluginProjectRun(t, project, "plugin", "test", "--batch", "2")
				if err != nil || !strings.Contains(out, ex.want) || !strings.Contains(out, "the state is 7 bytes") {
					t.Errorf("ledge plugin test --batch 2: %v\n%s", err, out)
				}
			}
			// A parameter the example does not know fails the poll with
			// the kit's message, naming it.
			out, err = pluginProjectRun(t, project, "plugin", "test", "--param", "nim=3")
			if err == nil || !strings.Contains(out, `unknown parameter "nim"`) {
				t.Fatalf("ledge plugin test --param nim=3: %v\n%s", err, out)
			}
		})
	}
}

// offlineRun runs the ledge binary in dir as a plugin author on an
// offline machine would: no module proxy, no checkout of Ledge.
func offlineRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*safety)
	defer cancel()
	cmd := ledgeCmd(ctx, args...)
	cmd.Dir = dir
	cmd.Env = append(offlineEnv(t), asCLI+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ledge %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// offlineEnv is the environment without LEDGE_ variables, with Go told
// to use no network and its own module cache, empty.
func offlineEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEDGE_") && !strings.HasPrefix(kv, "GOPROXY=") && !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOMODCACHE=") {
			env = append(env, kv)
		}
	}
	return append(env, "GOPROXY=off", "GOFLAGS=-mod=mod", "GOMODCACHE="+t.TempDir())
}

// A Go project from ledge plugin init builds and passes its own tests in
// an empty directory outside any checkout, with no module proxy and an
// empty module cache: the binary writes the plugin kit beside it.
func TestPluginProjectGoOffline(t *testing.T) {
	for _, kind := range []string{"filter", "commit-policy", "transform"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			offlineRun(t, dir, "plugin", "init", "p", "--kind", kind, "--lang", "go")
			project := filepath.Join(dir, "p")
			offlineRun(t, project, "plugin", "build")
			goTest := exec.Command("go", "test", "./...")
			goTest.Dir, goTest.Env = project, offlineEnv(t)
			if out, err := goTest.CombinedOutput(); err != nil {
				t.Fatalf("go test in the generated project: %v\n%s", err, out)
			}
			out := offlineRun(t, project, "plugin", "test")
			if !strings.Contains(out, "ok: ") {
				t.Errorf("ledge plugin test printed\n%s", out)
			}
			mod, err := os.ReadFile(filepath.Join(project, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(mod), "replace github.com/ledgemq/ledge => ./ledge-sdk") {
				t.Errorf("go.mod does not use the kit written beside it:\n%s", mod)
			}
		})
	}
}

// init's next: line and the project's README give the same commands,
// from the project's directory, and they work there; plugin test
// --param overrides one of the manifest's parameters, and plugin bench
// takes the project as test does.
func TestPluginProjectCommandsFromItsDirectory(t *testing.T) {
	dir := t.TempDir()
	out, err := pluginProjectRun(t, dir, "plugin", "init", "only-errors", "--kind", "filter", "--lang", "go")
	if err != nil {
		t.Fatalf("ledge plugin init: %v\n%s", err, out)
	}
	_, next, ok := strings.Cut(out, "next: ")
	if !ok {
		t.Fatalf("init printed no next: line:\n%s", out)
	}
	steps := strings.Split(strings.TrimSpace(strings.SplitN(next, "\n", 2)[0]), " && ")
	if steps[0] != "cd only-errors" {
		t.Fatalf("next: starts with %q, want cd only-errors", steps[0])
	}
	project := filepath.Join(dir, "only-errors")
	readme, err := os.ReadFile(filepath.Join(project, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "From this directory:") {
		t.Errorf("the README does not say where its commands run:\n%s", readme)
	}
	for _, step := range steps[1:] {
		if !strings.Contains(string(readme), step) {
			t.Errorf("the README lacks %q of init's next: line:\n%s", step, readme)
		}
		args := strings.Fields(step)
		if args[0] != "ledge" || args[2] == "add" {
			continue // adding needs a node: TestGroupPolicyAppliesWithoutAFlag adds one
		}
		if out, err := pluginProjectRun(t, project, args[1:]...); err != nil {
			t.Fatalf("%s in the project: %v\n%s", step, err, out)
		}
	}

	// equals=info with the manifest's field=level: the info record is
	// kept, the error records dropped, against records.jsonl's verdicts.
	out, err = pluginProjectRun(t, project, "plugin", "test", "--param", "equals=info")
	if err == nil {
		t.Fatalf("plugin test --param equals=info passed:\n%s", out)
	}
	for _, want := range []string{`keep 1 {"level": "info", "msg": "started"}`, `drop 0 {"level": "error", "msg": "disk full"}`} {
		if !strings.Contains(out, want) {
			t.Errorf("plugin test --param equals=info lacks %q:\n%s", want, out)
		}
	}
	out, err = pluginProjectRun(t, project, "plugin", "bench", "--duration", "50ms")
	if err != nil || !strings.Contains(out, "records/s") {
		t.Fatalf("plugin bench in the project: %v\n%s", err, out)
	}
}

// The WebAssembly text templates read the input region through named
// offsets, each the value the AssemblyScript kit gives the same name
// (whose values sdk/plugin's tests check against the ABI), and through
// no bare offset=N.
func TestWATTemplatesNameTheirOffsets(t *testing.T) {
	kit, err := os.ReadFile("../../sdk/plugin/assemblyscript/ledge.ts")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^export const ([A-Z_0-9]+): \w+ = (\w+);`).FindAllStringSubmatch(string(kit), -1) {
		named[m[1]] = m[2]
	}
	for _, kind := range []string{"filter", "commit-policy", "transform"} {
		b, err := pluginTemplates.ReadFile("plugintemplates/wat/" + kind + "/plugin.wat.tmpl")
		if err != nil {
			t.Fatal(err)
		}
		globals := regexp.MustCompile(`\(global \$([A-Z_]+) i32 \(i32\.const (\d+)\)\)`).FindAllStringSubmatch(string(b), -1)
		if len(globals) < 3 {
			t.Errorf("%s: %d named offsets", kind, len(globals))
		}
		for _, g := range globals {
			if named[g[1]] != g[2] {
				t.Errorf("%s: $%s is %s; ledge.ts has %q", kind, g[1], g[2], named[g[1]])
			}
		}
		if m := regexp.MustCompile(`offset=\d+`).Find(b); m != nil {
			t.Errorf("%s: a bare %s", kind, m)
		}
	}
}

func TestPluginInitRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plugin", "init", "a/b"}, `"a/b" cannot name a plugin`},
		{[]string{"plugin", "init", "x", "--kind", "map"}, `--kind "map" is not a plugin kind`},
		{[]string{"plugin", "init", "x", "--lang", "rust"}, `--lang "rust" is not a language`},
		{[]string{"plugin", "build", "."}, "is not a plugin project"},
	} {
		out, err := pluginProjectRun(t, dir, tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("ledge %s: %v\n%s\nwant an error with %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
}
