package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/syncbuf"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestReadmeRunsAsWritten walks the README as a new user would: it builds
// the binary, starts `ledge serve` on a fresh data directory, and runs
// every command of the Quickstart, "Beyond one consumer" and the plugin
// section, as written, through a shell in that directory. Three things
// differ, and only in where things are: the node listens on free ports
// (the CLI finds them in LEDGE_SERVER and LEDGE_HTTP_ADDR, which it
// documents), the uplink's Kafka is an in-process kfake cluster instead
// of broker:9092, and the plugin project, written outside a checkout of
// Ledge, is pointed at this one with LEDGE_SOURCE.
func TestReadmeRunsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and a plugin")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	commands := readmeCommands(string(readme), "## Quickstart", "## Beyond one consumer", "## A filter plugin")
	if len(commands) < 15 {
		t.Fatalf("found %d commands in the README's sections: did a heading change?\n%s", len(commands), strings.Join(commands, "\n"))
	}

	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "edge.demo"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*safety)
	defer cancel()
	env := append(os.Environ(), "LEDGE_SOURCE="+root)
	// go build -o ledge ./cmd/ledge, from the checkout, writing ./ledge in
	// the README's directory; go run is the same build, then a run.
	buildLedge := func(line string) {
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "ledge"), "./cmd/ledge")
		build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, b)
		}
	}
	var node *readmeNode
	ran := map[string]string{}
	for _, line := range commands {
		var out string
		switch {
		case line == "go run ./cmd/ledge serve":
			buildLedge(line)
			node = startReadmeNode(t, ctx, dir)
			env = append(env, "LEDGE_SERVER="+node.addr, "LEDGE_HTTP_ADDR="+node.http)
			continue
		case line == "go build -o ledge ./cmd/ledge":
			buildLedge(line)
			continue
		case node == nil:
			t.Fatalf("%q comes before the node is started", line)
		case strings.Contains(line, "--follow"):
			out = runUntil(t, ctx, dir, env, line, "world\n")
		default:
			shell := strings.ReplaceAll(line, "broker:9092", kafka.ListenAddrs()[0])
			cmd := exec.CommandContext(ctx, "sh", "-c", shell)
			cmd.Dir, cmd.Env = dir, env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout.String(), stderr.String())
			}
			out = stdout.String()
		}
		ran[line] = out
	}

	// What the README promises these commands show.
	for prefix, want := range map[string]string{
		"./ledge consume demo --from earliest":                    "hello\nworld\n",
		"./ledge consume demo --consumer me --commit --follow":    "hello\nworld\n",
		"./ledge consume demo --group audit":                      "hello\nworld\n",
		"./ledge group describe audit":                            "group audit",
		"./ledge state get counter demo 0":                        "group counter has no state on demo/0",
		"./ledge status":                                          "demo",
		"./ledge plugin test only-errors":                         "ok: 6 verdicts",
		"./ledge consume demo --filter only-errors --param field": "{\"level\":\"error\",\"msg\":\"disk full\"}\n",
	} {
		found := false
		for line, out := range ran {
			if strings.HasPrefix(line, prefix) {
				found = true
				if !strings.Contains(out, want) {
					t.Errorf("%s printed\n%s\nwant %q", line, out, want)
				}
			}
		}
		if !found {
			t.Errorf("the README no longer runs %q", prefix)
		}
	}
	if out := ran["./ledge consume demo --filter only-errors --param field=level --param equals=error"]; strings.Contains(out, "info") || strings.Contains(out, "hello") {
		t.Errorf("the filter let through records it drops:\n%s", out)
	}
}

// readmeCommands returns the command lines of the sh blocks of the named
// sections, without their comments.
func readmeCommands(readme string, sections ...string) []string {
	comment := regexp.MustCompile(`\s+#\s.*$`)
	var out []string
	var inSection, inBlock bool
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = false
			for _, s := range sections {
				inSection = inSection || strings.HasPrefix(line, s)
			}
		case inSection && line == "```sh":
			inBlock = true
		case inBlock && line == "```":
			inBlock = false
		case inBlock:
			if cmd := strings.TrimSpace(comment.ReplaceAllString(line, "")); cmd != "" {
				out = append(out, cmd)
			}
		}
	}
	return out
}

// readmeNode is `./ledge serve` running in the README's directory.
type readmeNode struct{ addr, http string }

var statusPageLine = regexp.MustCompile(`Status page: http://(\S+)/`)

func startReadmeNode(t *testing.T, ctx context.Context, dir string) *readmeNode {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "ledge"), "serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("ledge serve: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	found := make(chan *readmeNode, 1)
	go func() {
		n := &readmeNode{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				n.addr = m[1]
			}
			if m := statusPageLine.FindStringSubmatch(sc.Text()); m != nil {
				n.http = m[1]
			}
			if n.addr != "" && n.http != "" {
				found <- n
				n = &readmeNode{} // report once
			}
		}
	}()
	select {
	case n := <-found:
		return n
	case <-ctx.Done():
		t.Fatalf("ledge serve did not say where it listens\n%s", stderr.String())
	}
	return nil
}

// runUntil runs a command that follows (it runs until interrupted) until
// its output ends with want, then interrupts it, as Ctrl-C would, and
// returns what it printed.
func runUntil(t *testing.T, ctx context.Context, dir string, env []string, line, want string) string {
	t.Helper()
	args := strings.Fields(line)
	cmd := exec.CommandContext(ctx, filepath.Join(dir, strings.TrimPrefix(args[0], "./")), args[1:]...)
	cmd.Dir, cmd.Env = dir, env
	var out syncbuf.Buffer
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for !strings.HasSuffix(out.String(), want) {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			t.Fatalf("%s: printed %q, never %q\n%s", line, out.String(), want, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s after Ctrl-C: %v\n%s", line, err, stderr.String())
	}
	return out.String()
}
