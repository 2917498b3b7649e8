package main

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/datadir"
	"github.com/ledgemq/ledge/sdk"
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

// startServe starts `ledge serve args...` in dir and returns its banner,
// up to "Press Ctrl-C", and a function that stops it with sig and waits.
func startServe(t *testing.T, dir string, args ...string) (banner string, stop func(os.Signal)) {
	t.Helper()
	cmd := ledgeCmd(context.Background(), append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func(sig os.Signal) {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(safety):
			_ = cmd.Process.Kill()
			t.Error("ledge serve did not stop")
		}
	}
	t.Cleanup(func() { stop(os.Interrupt) })
	lines := make(chan string, 1)
	go func() {
		var b []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b = append(b, sc.Text())
			if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
				break
			}
		}
		lines <- strings.Join(b, "\n")
		for sc.Scan() { // keep the pipe drained
		}
	}()
	select {
	case banner = <-lines:
	case <-time.After(safety):
		t.Fatal("ledge serve printed no banner")
	}
	return banner, stop
}

// shellWithLedge returns a shell running script in dir, with `ledge` on
// its PATH as this test binary and no LEDGE_* of the developer's.
func shellWithLedge(t *testing.T, ctx context.Context, dir, script string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "ledge")); err != nil {
		t.Fatal(err)
	}
	cmd := ledgeCmd(ctx)
	cmd.Path, cmd.Args = "/bin/sh", []string{"sh", "-e", "-c", script}
	cmd.Dir = dir
	for i, kv := range cmd.Env {
		if strings.HasPrefix(kv, "PATH=") {
			cmd.Env[i] = "PATH=" + bin + string(os.PathListSeparator) + kv[len("PATH="):]
		}
	}
	return cmd
}

// bannerSteps returns the commands the banner says to run from another
// terminal, and the directory it names (empty: any).
func bannerSteps(t *testing.T, banner string) (dir string, steps []string) {
	t.Helper()
	in := false
	for _, l := range strings.Split(banner, "\n") {
		switch {
		case strings.HasPrefix(l, "From another terminal"):
			in = true
			if d, ok := strings.CutPrefix(l, "From another terminal in "); ok {
				dir = strings.TrimSuffix(d, ":")
			}
		case strings.HasPrefix(l, "From anywhere else"):
			in = false
		case in:
			steps = append(steps, strings.TrimSpace(l))
		}
	}
	if len(steps) == 0 {
		t.Fatalf("the banner says nothing to run from another terminal:\n%s", banner)
	}
	return dir, steps
}

// A node on its own ports and a data directory of its own name is found
// by what the banner prints, run as printed: by the CLI, ledge status
// and sdk.Dial(ctx, ""), all through the listen file the node keeps in
// its data directory while it runs.
func TestServeBannerCommandsWorkAsPrintedOffTheDefaults(t *testing.T) {
	for _, name := range []string{"ledge-data", "var/my node"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			home := t.TempDir()
			banner, stop := startServe(t, home, "--data-dir", name, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
			dir, steps := bannerSteps(t, banner)
			if dir == "" {
				dir = t.TempDir() // any directory: the banner says how to name the data directory
			}
			ctx, cancel := context.WithTimeout(context.Background(), safety)
			defer cancel()
			script := strings.Join(steps, "\n") + "\nledge status\n"
			out, err := shellWithLedge(t, ctx, dir, script).CombinedOutput()
			if err != nil {
				t.Fatalf("the banner's commands, run in %s:\n%s\n%v\n%s", dir, script, err, out)
			}
			for _, want := range []string{"created topic demo", "hello", "ready", "HIGH WATERMARK"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the banner's commands did not print %q:\n%s", want, out)
				}
			}

			dataDir := filepath.Join(home, name)
			listen, live, err := datadir.ReadListen(dataDir)
			if err != nil || !live {
				t.Fatalf("the listen file of a running node: %+v live %v, %v", listen, live, err)
			}
			t.Setenv(sdk.EnvDataDir, dataDir)
			c, err := sdk.Dial(ctx, "")
			if err != nil {
				t.Fatalf("sdk.Dial(ctx, \"\") with %s=%s: %v", sdk.EnvDataDir, dataDir, err)
			}
			if _, err := c.DescribeTopic(ctx, "demo"); err != nil || c.Addr() != listen.QUIC {
				t.Errorf("sdk.Dial(ctx, \"\") dialed %s (the node listens on %s): %v", c.Addr(), listen.QUIC, err)
			}
			_ = c.Close()

			stop(os.Interrupt)
			if _, err := os.Stat(filepath.Join(dataDir, datadir.ListenFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a stopped node left its listen file: %v", err)
			}
		})
	}
}

// A node killed without a chance to remove its listen file is not
// dialed through it: the SDK says nothing answers at the default
// address, and that the file is stale.
func TestListenFileOfAKilledNodeIsStale(t *testing.T) {
	home := t.TempDir()
	_, stop := startServe(t, home, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	stop(os.Kill)
	dataDir := filepath.Join(home, sdk.DefaultDataDir)
	if _, live, err := datadir.ReadListen(dataDir); err != nil || live {
		t.Fatalf("the listen file of a killed node: live %v, %v", live, err)
	}
	addr, src, from := sdk.DialAddr("", sdk.WithDataDir(dataDir))
	if src != sdk.AddrDefault || addr != sdk.DefaultAddr || !strings.Contains(from, "stale") {
		t.Errorf("sdk.DialAddr beside a killed node's data directory = %s, %v, %q", addr, src, from)
	}
}
