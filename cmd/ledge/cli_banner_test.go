package main

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// The command ledge serve prints for use from anywhere else runs as
// printed, out of the node's directory, and names the token by its file:
// a secret on a command line is in every process listing.
func TestServeBannerCommandRunsFromAnywhere(t *testing.T) {
	dir := t.TempDir()
	cmd := ledgeCmd(context.Background(), "serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(safety):
			_ = cmd.Process.Kill()
			t.Error("ledge serve did not stop")
		}
	})
	banner := make(chan string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
				break
			}
		}
		banner <- strings.Join(lines, "\n")
		for sc.Scan() { // keep the pipe drained
		}
	}()
	var text string
	select {
	case text = <-banner:
	case <-time.After(safety):
		t.Fatal("ledge serve printed no banner")
	}

	var line string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "ledge --server") {
			line = strings.TrimSpace(l)
		}
	}
	if line == "" || strings.Contains(line, "--token ") || strings.Contains(line, "$(") || !strings.Contains(line, "--token-file") {
		t.Fatalf("the banner's command from anywhere else: %q, want one with --token-file\n%s", line, text)
	}
	if !strings.Contains(text, "LEDGE_TOKEN_FILE") {
		t.Errorf("the banner does not name LEDGE_TOKEN_FILE:\n%s", text)
	}

	n := &servedNode{dir: dir}
	n.mustRun(t, "", "topic", "create", "demo", "--server", listeningLine.FindStringSubmatch(text)[1])
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	run := ledgeCmd(ctx, strings.Fields(line)[1:]...)
	run.Dir = t.TempDir() // anywhere else: no ledge-data here
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "demo") {
		t.Errorf("%s: %v\n%s", line, err, out)
	}
}
