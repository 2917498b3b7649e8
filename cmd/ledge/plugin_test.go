package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadRecords(t *testing.T) {
	in := `# a comment
{"value": {"site": "lyon"}, "timestamp": 5}
{"key": "k", "value": "text", "headers": {"checkpoint": "yes", "n": null}}

{"offset": 10, "value_base64": "AAE=", "key": null}
{}
`
	recs, err := readRecords(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	if r := recs[0]; r.Offset != 0 || r.Timestamp != 5 || string(r.Value) != `{"site": "lyon"}` || r.Key != nil {
		t.Errorf("record 0: %+v", r)
	}
	if r := recs[1]; r.Offset != 1 || string(r.Key) != "k" || string(r.Value) != "text" || len(r.Headers) != 2 ||
		r.Headers[0].Key != "checkpoint" || r.Headers[1].Value != nil {
		t.Errorf("record 1: %+v", r)
	}
	if r := recs[2]; r.Offset != 10 || !bytes.Equal(r.Value, []byte{0, 1}) || r.Key != nil {
		t.Errorf("record 2: %+v", r)
	}
	if r := recs[3]; r.Offset != 11 || r.Value != nil {
		t.Errorf("record 3: %+v", r)
	}
	for _, bad := range []string{`{"offset": 5}` + "\n" + `{"offset": 5}`, `{"valu": 1}`, `not json`, `{"value": "x", "value_base64": "AA=="}`} {
		if _, err := readRecords(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// ledge plugin test and bench on the checkpoint example.
func TestPluginCommands(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the example plugin")
	}
	dir := t.TempDir()
	wasm := filepath.Join(dir, "checkpoint.wasm")
	build := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", wasm, "../../sdk/plugin/examples/checkpoint")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	input := filepath.Join(dir, "records.jsonl")
	os.WriteFile(input, []byte(`{"value": "a"}
{"value": "b", "headers": {"checkpoint": "1"}}
{"value": "c"}
`), 0o644)
	run := func(args ...string) (string, error) {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	cache := filepath.Join(dir, "cache")
	out, err := run("plugin", "test", wasm, "--input", input, "--cache-dir", cache)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "proposal: commit through 1 (committed position 2)") || !strings.Contains(out, "commit-policy: 1 call,") {
		t.Errorf("plugin test output:\n%s", out)
	}
	out, err = run("plugin", "test", wasm, "--input", input, "--cache-dir", cache, "--kind", "filter")
	if err == nil || !strings.Contains(err.Error(), "does not implement a filter") {
		t.Errorf("as a filter: %v\n%s", err, out)
	}
	out, err = run("plugin", "bench", wasm, "--cache-dir", cache, "--duration", "1ms", "--records", "100")
	if err != nil || !strings.Contains(out, "records/s") || !strings.Contains(out, "time per call") ||
		!strings.Contains(out, "100 records of ") || strings.Contains(out, "bytes per call") {
		t.Errorf("plugin bench: %v\n%s", err, out)
	}
}
