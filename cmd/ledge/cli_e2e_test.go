package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// safety bounds each step of the CLI tests: it turns a hang into a
// failure; no test relies on it.
const safety = 60 * time.Second

// buildLedge builds the ledge binary into a temporary directory.
func buildLedge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ledge")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// servedNode is `ledge serve` running in dir on an ephemeral port.
type servedNode struct {
	addr string
	dir  string
}

var listeningLine = regexp.MustCompile(`listening on (\S+)`)

// serve starts `ledge serve` in dir with ./ledge-data and waits for the
// line saying where it listens.
func serve(t *testing.T, bin, dir string) *servedNode {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
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
func (n *servedNode) run(t *testing.T, bin, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = n.dir
	env := []string{"LEDGE_SERVER=" + n.addr}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEDGE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func (n *servedNode) mustRun(t *testing.T, bin, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := n.run(t, bin, stdin, args...)
	if err != nil {
		t.Fatalf("ledge %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// TestQuickstart runs the README's quickstart through the built binary:
// serve, then topic create, produce and consume from the node's directory.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	bin := buildLedge(t)
	n := serve(t, bin, t.TempDir())

	n.mustRun(t, bin, "", "topic", "create", "demo")
	if out := n.mustRun(t, bin, "", "topic", "list"); !strings.Contains(out, "demo") {
		t.Fatalf("topic list does not show demo:\n%s", out)
	}
	n.mustRun(t, bin, "one\ntwo\nthree\n", "produce", "demo")
	if out := n.mustRun(t, bin, "", "consume", "demo"); out != "one\ntwo\nthree\n" {
		t.Fatalf("consume printed %q", out)
	}

	// A named consumer commits what it printed and resumes after it.
	if out := n.mustRun(t, bin, "", "consume", "demo", "--consumer", "c", "--commit", "--count", "2"); out != "one\ntwo\n" {
		t.Fatalf("first consume printed %q", out)
	}
	if out := n.mustRun(t, bin, "", "consume", "demo", "--consumer", "c", "--format", "json"); !strings.Contains(out, `"offset":2,`) ||
		!strings.Contains(out, `"value":"three"`) || strings.Count(out, "\n") != 1 {
		t.Fatalf("second consume printed %q", out)
	}
	if out := n.mustRun(t, bin, "", "topic", "describe", "demo"); !regexp.MustCompile(`(?m)^0\s+0\s+3\s+3\s+1\s+ok`).MatchString(out) {
		t.Fatalf("topic describe:\n%s", out)
	}

	// Failures exit non-zero with the reason on stderr.
	_, errOut, err := n.run(t, bin, "", "consume", "missing")
	if err == nil || !strings.Contains(errOut, "unknown topic") {
		t.Fatalf("consume of a missing topic: err %v, stderr %q", err, errOut)
	}
	_, errOut, err = n.run(t, bin, "", "topic", "list", "--token", "not-a-token")
	if err == nil || !strings.Contains(errOut, "unauthenticated") {
		t.Fatalf("a bad token: err %v, stderr %q", err, errOut)
	}
}

// TestTokensThroughCLI creates a produce-only token, uses it, and revokes
// it.
func TestTokensThroughCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	bin := buildLedge(t)
	n := serve(t, bin, t.TempDir())
	n.mustRun(t, bin, "", "topic", "create", "t")
	secret := strings.TrimSpace(n.mustRun(t, bin, "", "token", "create", "--topic", "t", "--allow", "produce", "--label", "writer", "--quiet"))
	n.mustRun(t, bin, "x\n", "produce", "t", "--token", secret)
	_, errOut, err := n.run(t, bin, "", "consume", "t", "--token", secret)
	if err == nil || !strings.Contains(errOut, "forbidden") {
		t.Fatalf("consume with a produce-only token: err %v, stderr %q", err, errOut)
	}
	list := n.mustRun(t, bin, "", "token", "list")
	m := regexp.MustCompile(`(?m)^(\S+)\s+writer\s+t\s+produce`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("token list:\n%s", list)
	}
	n.mustRun(t, bin, "", "token", "revoke", m[1])
	_, errOut, err = n.run(t, bin, "y\n", "produce", "t", "--token", secret)
	if err == nil || !strings.Contains(errOut, "unauthenticated") {
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
