package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	for _, kind := range []string{"filter", "commit-policy"} {
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
			if kind == "commit-policy" {
				want = "ok: 1 proposal as"
			}
			if !strings.Contains(out, want) {
				t.Errorf("ledge plugin test printed\n%s\nwant %q", out, want)
			}
		})
	}
}

func TestPluginProjectGo(t *testing.T) { testPluginProject(t, "go") }

func TestPluginProjectAssemblyScript(t *testing.T) {
	needTool(t, "node") // npm runs the compiler, asc, with node
	needTool(t, "npm")
	testPluginProject(t, "assemblyscript")
}

func TestPluginProjectWAT(t *testing.T) {
	needTool(t, "wat2wasm")
	testPluginProject(t, "wat")
}

// A Go project's own tests pass natively, and ledge plugin test fails,
// naming the record, when the module's verdict is not the expected one.
func TestPluginProjectTestCatchesAWrongVerdict(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"plugin", "init", "only-errors", "--kind", "filter", "--lang", "go"},
		{"plugin", "build", "only-errors"},
	} {
		if out, err := pluginProjectRun(t, dir, args...); err != nil {
			t.Fatalf("ledge %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	project := filepath.Join(dir, "only-errors")
	goTest := exec.Command("go", "test", "./...")
	goTest.Dir = project
	if out, err := goTest.CombinedOutput(); err != nil {
		t.Fatalf("go test in the generated project: %v\n%s", err, out)
	}

	records := filepath.Join(project, "records.jsonl")
	b, err := os.ReadFile(records)
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Replace(string(b), `"msg": "started"}, "expect": "drop"`, `"msg": "started"}, "expect": "keep"`, 1)
	if wrong == string(b) {
		t.Fatal("the sample records changed: update this test")
	}
	if err := os.WriteFile(records, []byte(wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := pluginProjectRun(t, dir, "plugin", "test", "only-errors")
	if err == nil {
		t.Fatalf("ledge plugin test passed with a wrong expectation:\n%s", out)
	}
	for _, want := range []string{"drop 1 {\"level\": \"info\", \"msg\": \"started\"}   <- expected keep", "1 of 6 verdicts differ"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
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
