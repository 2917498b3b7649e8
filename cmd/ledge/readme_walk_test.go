//go:build unix

package main

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/syncbuf"
	"github.com/ledgemq/ledge/internal/testtool"
)

// copyOfRepository copies the files git tracks in root, as they are in
// the working tree, into a new directory: what a clone of the commit
// about to be made would hold. The working files, not HEAD (git archive,
// git clone), so that a developer's uncommitted change to the README or
// the code is what the walk tests; the tracked files only, not the
// untracked ones, as a clone has no others: a new file the change needs
// and git does not know fails here as it would fail the clone.
func copyOfRepository(t *testing.T, root string) string {
	t.Helper()
	git := testtool.Need(t, "Debian: apt-get install -y git (the README walk copies what git tracks)", "git")
	list, err := exec.Command(git, "-C", root, "ls-files", "-z").Output()
	if err != nil {
		if testtool.InCI() {
			t.Fatalf("git ls-files in %s: %v", root, err)
		}
		t.Skipf("%s is not a git checkout (%v): the README walk copies what git tracks", root, err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimSuffix(string(list), "\x00"), "\x00") {
		from, to := filepath.Join(root, filepath.FromSlash(name)), filepath.Join(dir, filepath.FromSlash(name))
		info, err := os.Lstat(from)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // deleted, and the commit will not have it
		case err != nil:
			t.Fatal(err)
		case info.IsDir():
			continue // a submodule
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := copyFile(from, to, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func copyFile(from, to string, perm fs.FileMode) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// withoutLedgeEnv drops the LEDGE_* variables of the developer's
// environment (LEDGE_SOURCE, LEDGE_SERVER...): a new user has none.
func withoutLedgeEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "LEDGE_") {
			out = append(out, kv)
		}
	}
	return out
}

// goRunNode is `go run ./cmd/ledge serve` running in the copy, as in a
// terminal of its own: in its own process group, which Ctrl-C signals.
type goRunNode struct {
	w              *readmeWalk
	cmd            *exec.Cmd
	addr, http     string
	stdout, stderr *syncbuf.Buffer
	done           chan error
	stopped        bool
}

var statusPageLine = regexp.MustCompile(`Status page: http://(\S+)/`)

// goRunServe starts line (go run ./cmd/ledge serve) on free ports and
// waits until the node says where it listens and its /readyz answers 200.
func (w *readmeWalk) goRunServe(line string) *goRunNode {
	t := w.t
	t.Helper()
	args := strings.Fields(line)
	n := &goRunNode{w: w, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, done: make(chan error, 1)}
	n.cmd = exec.Command(args[0], args[1:]...)
	n.cmd.Dir, n.cmd.Stdout, n.cmd.Stderr = w.dir, n.stdout, n.stderr
	n.cmd.Env = append(w.env, "LEDGE_LISTEN=127.0.0.1:0", "LEDGE_HTTP_LISTEN=127.0.0.1:0")
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	go func() { n.done <- n.cmd.Wait() }()
	for n.http == "" || n.addr == "" {
		select {
		case err := <-n.done:
			t.Fatalf("%s ended (%v) before it listened\n%s%s", line, err, n.stdout.String(), n.stderr.String())
		case <-w.ctx.Done():
			n.kill()
			t.Fatalf("%s did not say where it listens\n%s%s", line, n.stdout.String(), n.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if m := listeningLine.FindStringSubmatch(n.stdout.String()); m != nil {
			n.addr = m[1]
		}
		if m := statusPageLine.FindStringSubmatch(n.stdout.String()); m != nil {
			n.http = m[1]
		}
	}
	for {
		resp, err := http.Get("http://" + n.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return n
			}
		}
		select {
		case <-w.ctx.Done():
			n.kill()
			t.Fatalf("%s: /readyz never answered 200 (%v)\n%s", line, err, n.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop presses Ctrl-C: SIGINT to the process group, as a terminal sends
// it. go run ignores it while the node stops, then exits 1 whatever the
// node did (its builder saw the interrupt); the node's own failure shows
// as go's "exit status N" or "signal: ..." line. The node must have
// stopped gracefully, as it does on SIGINT and SIGTERM alike. (A SIGTERM
// to the group would end go run at once, before the node, and lose that
// line.)
func (n *goRunNode) stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-n.done:
		var exit *exec.ExitError
		stderr := n.stderr.String()
		failed := regexp.MustCompile(`(?m)^(exit status \d+|signal: .*)$`).FindString(stderr)
		if (err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1)) || failed != "" || !strings.Contains(stderr, "node stopped") {
			n.w.t.Errorf("go run ./cmd/ledge serve after Ctrl-C: %v, %q; want the node stopped\n%s", err, failed, stderr)
		}
	case <-time.After(safety):
		n.kill()
		n.w.t.Errorf("go run ./cmd/ledge serve did not stop at Ctrl-C\n%s", n.stderr.String())
	}
}

func (n *goRunNode) kill() {
	n.stopped = true
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
}

// following is a command that runs until interrupted (consume --follow).
type following struct {
	w              *readmeWalk
	line           string
	cmd            *exec.Cmd
	stdout, stderr *syncbuf.Buffer
}

// follow starts line and waits until ready says, from what it printed so
// far, that it is where the walk wants it.
func (w *readmeWalk) follow(line string, ready func(stdout, stderr string) bool) *following {
	t := w.t
	t.Helper()
	args := strings.Fields(line)
	f := &following{w: w, line: line, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}}
	f.cmd = exec.CommandContext(w.ctx, filepath.Join(w.dir, strings.TrimPrefix(args[0], "./")), args[1:]...)
	f.cmd.Dir, f.cmd.Env = w.dir, w.env
	f.cmd.Stdout, f.cmd.Stderr = f.stdout, f.stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for !ready(f.stdout.String(), f.stderr.String()) {
		select {
		case <-w.ctx.Done():
			_ = f.cmd.Process.Kill()
			t.Fatalf("%s: printed %q, never what the walk waits for\n%s", line, f.stdout.String(), f.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return f
}

// stop interrupts the command, as Ctrl-C would, and returns what it
// printed.
func (f *following) stop() string {
	f.w.t.Helper()
	_ = f.cmd.Process.Signal(os.Interrupt)
	if err := f.cmd.Wait(); err != nil {
		f.w.t.Fatalf("%s after Ctrl-C: %v\n%s", f.line, err, f.stderr.String())
	}
	return f.stdout.String()
}
