package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ledgemq/ledge/internal/config"
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
