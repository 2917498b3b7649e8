package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFullDisk drives the real binary on a real full disk (a 64 MiB
// tmpfs; the test needs root to mount it and skips otherwise): produce
// until the disk is full, purge on the full disk, fill it again, SIGKILL
// and restart on it, SIGTERM while the metadata store waits for room
// that is not there, and writes resuming once space is freed. The node
// must never fail a partition or panic.
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot mount a tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	s := newServedLedge(t, buildLedge(t), filepath.Join(mnt, "ledge-data"))
	s.start()
	defer s.checkNoPanic()
	run(t, s, nil, "topic", "create", "t")

	fillDisk(t, s)
	wantMetric(t, s, "ledge_disk_full", "1")
	if out := run(t, s, nil, "topic", "purge", "t", "--yes"); !strings.Contains(out, "purged t") {
		t.Fatalf("purge on a full disk: %s", out)
	}
	wantMetric(t, s, "ledge_disk_full", "0")
	run(t, s, strings.NewReader("after the purge\n"), "produce", "t")

	// Killed on a full disk, it restarts on it: ready, reads served,
	// appends refused once the little room the restart found is used,
	// and /readyz says why.
	fillDisk(t, s)
	s.stop(syscall.SIGKILL)
	s.start()
	fillDisk(t, s)
	wantMetric(t, s, "ledge_disk_full", "1")
	if body := get(t, s, "/readyz?verbose"); !strings.Contains(body, "disk: full since") {
		t.Fatalf("/readyz on a full disk:\n%s", body)
	}
	if out := run(t, s, nil, "consume", "t", "--from", "earliest"); !strings.Contains(out, "xxxx") {
		t.Fatalf("reads on a full disk: %.300s", out)
	}

	// No byte left at all (another program took the reserved room): the
	// restart waits for room, and SIGTERM stops it.
	s.stop(syscall.SIGKILL)
	filler := filepath.Join(mnt, "filler")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=64k").CombinedOutput(); err == nil {
		t.Fatalf("dd filled a 64 MiB disk without an error: %s", out)
	}
	s.startNotReady()
	s.waitLog("metadata: background error")
	s.stop(syscall.SIGTERM)
	if !strings.Contains(s.logs.String(), "stopped during start-up") {
		t.Fatalf("SIGTERM during recovery:\n%s", s.logs.Tail(5))
	}

	// Space freed: it starts, and appends resume by themselves.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.start()
	run(t, s, nil, "topic", "purge", "t", "--yes")
	run(t, s, strings.NewReader("resumed\n"), "produce", "t")
	wantMetric(t, s, "ledge_disk_full", "0")
	s.stop(syscall.SIGTERM)
	if n := strings.Count(s.logs.String(), "metadata: background error"); n > 5 {
		t.Errorf("%d metadata error lines in a few seconds", n)
	}
	if strings.Contains(s.logs.String(), "partition failed") {
		t.Errorf("a partition failed on a full disk:\n%s", s.logs.Tail(20))
	}
}

// fillDisk produces 4 MiB at a time until the node refuses for lack of
// space.
func fillDisk(t *testing.T, s *servedLedge) {
	t.Helper()
	line := strings.Repeat("x", 1000) + "\n"
	chunk := strings.Repeat(line, 4<<10)
	for i := 0; i < 40; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := s.client("produce", "t")
		cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
		cmd.Env = s.client().Env
		cmd.Stdin = strings.NewReader(chunk)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			if !strings.Contains(string(out), "disk is full") && ctx.Err() == nil {
				t.Fatalf("produce: %v: %s", err, out)
			}
			return
		}
	}
	t.Fatal("160 MiB fitted on a 64 MiB disk")
}

// run runs a client command and returns its output; it must succeed.
func run(t *testing.T, s *servedLedge, stdin io.Reader, args ...string) string {
	t.Helper()
	cmd := s.client(args...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ledge %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func get(t *testing.T, s *servedLedge, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + s.http + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// wantMetric waits until the node's metric name reads value.
func wantMetric(t *testing.T, s *servedLedge, name, value string) {
	t.Helper()
	for deadline := time.Now().Add(safety); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, l := range strings.Split(get(t, s, "/metrics"), "\n") {
			if l == name+" "+value {
				return
			}
		}
	}
	t.Fatalf("%s never read %s", name, value)
}

// startNotReady runs `ledge serve` without waiting for it to be ready.
func (s *servedLedge) startNotReady() {
	s.t.Helper()
	s.launch()
}

// waitLog waits until the node's stderr holds text.
func (s *servedLedge) waitLog(text string) {
	s.t.Helper()
	for deadline := time.Now().Add(safety); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(s.logs.String(), text) {
			return
		}
	}
	s.t.Fatalf("the node never logged %q:\n%s", text, s.logs.Tail(10))
}
