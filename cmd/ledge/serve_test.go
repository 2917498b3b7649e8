package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ledgemq/ledge/internal/config"
	"github.com/ledgemq/ledge/node"
)

func TestServeHelp(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--data-dir", "--listen", "--cert-names", "--cert-addrs", "ledge serve", "127.0.0.1:7420"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve --help lacks %q:\n%s", want, out.String())
		}
	}
}

// TestServeCPUProfile: with --cpuprofile, a node that stops gracefully
// leaves a CPU profile (gzip-compressed protocol buffers) in the file.
func TestServeCPUProfile(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Defaults()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Listen = "127.0.0.1:0"
	cfg.HTTP.Enabled = false
	cfg.CPUProfile = filepath.Join(dir, "cpu.pprof")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{started: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, out, io.Discard, cfg) }()
	select {
	case <-out.started:
	case err := <-done:
		t.Fatalf("serve ended before it started: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cfg.CPUProfile)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("the profile is not gzip data: % x", b[:min(len(b), 8)])
	}
}

// syncBuffer collects output and closes started once the node printed
// that it listens.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	started chan struct{}
	once    sync.Once
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if strings.Contains(s.b.String(), "listening on") {
		s.once.Do(func() { close(s.started) })
	}
	return n, err
}

// TestServeStartupFailures runs `ledge serve` where it cannot start: each
// time it exits with status 1 and one line naming the cause (besides its
// JSON log lines), with no stack trace.
func TestServeStartupFailures(t *testing.T) {
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	held := t.TempDir()
	serve(t, held) // holds ./ledge-data

	cases := []struct {
		name string
		dir  string // where serve runs, with ./ledge-data
		args []string
		want string
	}{
		{"QUIC port taken", t.TempDir(), []string{"--listen", udp.LocalAddr().String(), "--http-listen", "127.0.0.1:0"}, "QUIC address " + udp.LocalAddr().String() + " is already in use"},
		{"HTTP port taken", t.TempDir(), []string{"--listen", "127.0.0.1:0", "--http-listen", tcp.Addr().String()}, "address already in use"},
		{"data directory in use", held, []string{"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, "ledge-data is held by pid "},
	}
	if ro, ok := readOnlyCopy(t); ok {
		cases = append(cases, struct {
			name string
			dir  string
			args []string
			want string
		}{"read-only data directory", ro, []string{"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, "ledge-data is not writable"})
	} else {
		t.Log("not root or cannot mount: the read-only case is left out")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line := serveFailure(t, tc.dir, tc.args...)
			if !strings.Contains(line, tc.want) {
				t.Errorf("the error line %q does not say %q", line, tc.want)
			}
		})
	}
}

// serveFailure runs `ledge serve args...` in dir, expects exit status 1,
// and returns the one line of stderr that is not a JSON log line.
func serveFailure(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	cmd := ledgeCmd(ctx, append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("ledge serve: %v, want exit status 1\n%s", err, stderr.String())
	}
	var lines []string
	for l := range strings.Lines(stderr.String()) {
		if !strings.HasPrefix(l, "{") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "ledge: ") {
		t.Fatalf("want one error line, got:\n%s", stderr.String())
	}
	return lines[0]
}

// readOnlyCopy makes a directory holding a data directory (a fresh one,
// created by a node run elsewhere) and bind-mounts it read-only; it
// reports false where it cannot mount (not root).
func readOnlyCopy(t *testing.T) (string, bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "", false
	}
	src := t.TempDir()
	n, err := node.Open(context.Background(), node.Config{DataDir: filepath.Join(src, "ledge-data"), Listen: "127.0.0.1:0", RetentionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("mount", "--bind", src, ro).Run(); err != nil {
		return "", false
	}
	t.Cleanup(func() { _ = exec.Command("umount", ro).Run() })
	if err := exec.Command("mount", "-o", "remount,ro,bind", ro).Run(); err != nil {
		return "", false
	}
	return ro, true
}
