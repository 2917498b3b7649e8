package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// safety bounds each step of the CLI tests: it turns a hang into a
// failure; no test relies on it.
const safety = 60 * time.Second

// asCLI, set in the environment, makes the test binary run as the ledge
// command (see TestMain): the tests run the very code they were built
// with, without a separate build.
const asCLI = "LEDGE_TEST_RUN_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// ledgeCmd returns a command running the test binary as `ledge args...`.
func ledgeCmd(ctx context.Context, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	env := []string{asCLI + "=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEDGE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

// servedNode is `ledge serve` running in dir on an ephemeral port.
type servedNode struct {
	addr string
	dir  string
}

var listeningLine = regexp.MustCompile(`listening on (\S+)`)

// serve starts `ledge serve` in dir with ./ledge-data and waits for the
// line saying where it listens.
func serve(t *testing.T, dir string) *servedNode {
	t.Helper()
	cmd := ledgeCmd(context.Background(), "serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ledge serve exited with %v\n%s", err, stderr.String())
			}
		case <-time.After(safety):
			_ = cmd.Process.Kill()
			t.Errorf("ledge serve did not stop\n%s", stderr.String())
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("ledge serve ended before listening\n%s", stderr.String())
		}
		return &servedNode{addr: a, dir: dir}
	case <-time.After(safety):
		t.Fatalf("ledge serve did not start\n%s", stderr.String())
	}
	return nil
}

// run runs the binary in the node's directory with LEDGE_SERVER set (the
// port is ephemeral) and no other credentials: the CLI finds the CA and
// the admin token in ./ledge-data.
func (n *servedNode) run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	cmd := ledgeCmd(ctx, args...)
	cmd.Dir = n.dir
	cmd.Env = append(cmd.Env, "LEDGE_SERVER="+n.addr)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func (n *servedNode) mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := n.run(t, stdin, args...)
	if err != nil {
		t.Fatalf("ledge %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// TestQuickstart runs the README's quickstart through the ledge command:
// serve, then topic create, produce and consume from the node's directory.
func TestQuickstart(t *testing.T) {
	n := serve(t, t.TempDir())

	n.mustRun(t, "", "topic", "create", "demo")
	if out := n.mustRun(t, "", "topic", "list"); !strings.Contains(out, "demo") {
		t.Fatalf("topic list does not show demo:\n%s", out)
	}
	n.mustRun(t, "one\ntwo\nthree\n", "produce", "demo")
	if out := n.mustRun(t, "", "consume", "demo"); out != "one\ntwo\nthree\n" {
		t.Fatalf("consume printed %q", out)
	}

	// A named consumer commits what it printed and resumes after it.
	if out := n.mustRun(t, "", "consume", "demo", "--consumer", "c", "--commit", "--count", "2"); out != "one\ntwo\n" {
		t.Fatalf("first consume printed %q", out)
	}
	if out := n.mustRun(t, "", "consume", "demo", "--consumer", "c", "--format", "json"); !strings.Contains(out, `"offset":2,`) ||
		!strings.Contains(out, `"value":"three"`) || strings.Count(out, "\n") != 1 {
		t.Fatalf("second consume printed %q", out)
	}
	if out := n.mustRun(t, "", "topic", "describe", "demo"); !regexp.MustCompile(`(?m)^0\s+0\s+3\s+3\s+1\s+ok`).MatchString(out) {
		t.Fatalf("topic describe:\n%s", out)
	}

	// Failures exit non-zero with the reason on stderr.
	_, errOut, err := n.run(t, "", "consume", "missing")
	if err == nil || errOut != "ledge: topic missing does not exist: ledge topic list shows the topics, ledge topic create missing makes it\n" {
		t.Fatalf("consume of a missing topic: err %v, stderr %q", err, errOut)
	}
	_, errOut, err = n.run(t, "", "topic", "list", "--token", "not-a-token")
	if err == nil || !strings.Contains(errOut, "refused the token: pass a valid one with --token, --token-file or LEDGE_TOKEN") {
		t.Fatalf("a bad token: err %v, stderr %q", err, errOut)
	}
}

// TestTokensThroughCLI creates a produce-only token, uses it, and revokes
// it.
func TestTokensThroughCLI(t *testing.T) {
	n := serve(t, t.TempDir())
	n.mustRun(t, "", "topic", "create", "t")
	secret := strings.TrimSpace(n.mustRun(t, "", "token", "create", "--topic", "t", "--allow", "produce", "--label", "writer", "--quiet"))
	n.mustRun(t, "x\n", "produce", "t", "--token", secret)
	_, errOut, err := n.run(t, "", "consume", "t", "--token", secret)
	if err == nil || !strings.Contains(errOut, "the token may not do this") {
		t.Fatalf("consume with a produce-only token: err %v, stderr %q", err, errOut)
	}
	list := n.mustRun(t, "", "token", "list")
	m := regexp.MustCompile(`(?m)^(\S+)\s+writer\s+t\s+produce`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("token list:\n%s", list)
	}
	n.mustRun(t, "", "token", "revoke", m[1])
	_, errOut, err = n.run(t, "y\n", "produce", "t", "--token", secret)
	if err == nil || !strings.Contains(errOut, "refused the token") {
		t.Fatalf("produce with a revoked token: err %v, stderr %q", err, errOut)
	}
}

// TestEveryCommandHasAnExample checks the help of every command.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if strings.TrimSpace(sub.Example) == "" {
				t.Errorf("%q has no example in its help", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(newRootCommand())
}

// TestTopicLifecycleThroughCLI creates a topic with every setting, writes
// a file to one partition, reads part of it back, purges and deletes it.
func TestTopicLifecycleThroughCLI(t *testing.T) {
	n := serve(t, t.TempDir())
	n.mustRun(t, "", "topic", "create", "s", "--partitions", "3", "--durability", "interval", "--sync-interval", "50ms",
		"--compression", "zstd", "--retention-age", "7d", "--retention-bytes", "1GiB", "--timestamps", "append")
	var d struct {
		Partitions     int    `json:"partitions"`
		Durability     string `json:"durability"`
		SyncInterval   string `json:"sync_interval"`
		Compression    string `json:"compression"`
		Timestamps     string `json:"timestamps"`
		RetentionAge   string `json:"retention_age"`
		RetentionBytes int64  `json:"retention_bytes"`
		State          []struct {
			Partition     int    `json:"partition"`
			StartOffset   uint64 `json:"start_offset"`
			HighWatermark uint64 `json:"high_watermark"`
			History       uint64 `json:"history"`
		} `json:"partitions_state"`
	}
	describe := func() {
		t.Helper()
		if err := json.Unmarshal([]byte(n.mustRun(t, "", "topic", "describe", "s", "--json")), &d); err != nil {
			t.Fatal(err)
		}
	}
	describe()
	if d.Partitions != 3 || d.Durability != "interval" || d.SyncInterval != "50ms" || d.Compression != "zstd" ||
		d.Timestamps != "append" || d.RetentionAge != "168h0m0s" || d.RetentionBytes != 1<<30 {
		t.Fatalf("described as %+v", d)
	}

	file := filepath.Join(t.TempDir(), "lines.txt")
	if err := os.WriteFile(file, []byte("l0\nl1\r\nl2\nl3"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.mustRun(t, "", "produce", "s", "--file", file, "--partition", "1", "--header", "src=file", "--key", "k")
	out := n.mustRun(t, "", "consume", "s", "--partition", "1", "--from", "1", "--count", "2", "--format", "json")
	type record struct {
		Partition int              `json:"partition"`
		Offset    uint64           `json:"offset"`
		Key       string           `json:"key"`
		Value     string           `json:"value"`
		Headers   []map[string]any `json:"headers"`
	}
	var recs []record
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 2 || recs[0].Value != "l1" || recs[1].Value != "l2" || recs[0].Offset != 1 ||
		recs[0].Partition != 1 || recs[0].Key != "k" || recs[0].Headers[0]["value"] != "file" {
		t.Fatalf("consumed %q", out)
	}

	n.mustRun(t, "", "topic", "purge", "s", "--partition", "1", "--yes")
	describe()
	if p := d.State[1]; p.StartOffset != 4 || p.HighWatermark != 4 || p.History != 2 {
		t.Fatalf("partition 1 after purge: %+v", p)
	}
	if out := n.mustRun(t, "", "consume", "s"); out != "" {
		t.Fatalf("a purged topic still shows %q", out)
	}
	n.mustRun(t, "", "topic", "delete", "s", "--yes")
	if out := n.mustRun(t, "", "topic", "list"); strings.Contains(out, "s ") {
		t.Fatalf("deleted topic still listed:\n%s", out)
	}
}
