package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/syncbuf"
	"github.com/ledgemq/ledge/sdk"
)

// buildLedge builds the ledge binary, as operators run it, with the
// ledgetest tag: its test disk (LEDGE_TEST_DISK, cmd/ledge/testdisk.go)
// is there, and nothing else changes. It builds once per test process:
// every test runs the same binary, which TestMain removes at the end.
func buildLedge(t *testing.T) string {
	t.Helper()
	ledgeBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "ledge-e2e-")
		if err != nil {
			ledgeBinary.err = err
			return
		}
		ledgeBinary.dir = dir
		bin := filepath.Join(dir, "ledge")
		cmd := exec.Command("go", "build", "-tags", "ledgetest", "-o", bin, "github.com/ledgemq/ledge/cmd/ledge")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			ledgeBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		ledgeBinary.path = bin
	})
	if ledgeBinary.err != nil {
		t.Fatal(ledgeBinary.err)
	}
	return ledgeBinary.path
}

// ledgeBinary is the binary buildLedge built, shared by the tests of one
// process.
var ledgeBinary struct {
	once sync.Once
	dir  string // removed by TestMain
	path string
	err  error
}

// servedLedge is `ledge serve` on fixed addresses and a data directory,
// started and stopped again and again as systemd would. It keeps every
// run's stderr (to look for panics) and the figures of its starts and
// stops.
type servedLedge struct {
	t                    *testing.T
	bin, dir, addr, http string

	cmd    *exec.Cmd
	exited chan error
	logs   syncbuf.Buffer

	readyTimes    []time.Duration // exec to /readyz 200
	shutdownTimes []time.Duration // SIGTERM to exit
	env           []string        // added to the node's environment
	checked       int             // how much of logs stop has looked at
}

func newServedLedge(t *testing.T, bin, dir string) *servedLedge {
	return &servedLedge{t: t, bin: bin, dir: dir, addr: freeUDPPort(t), http: freeTCPPort(t)}
}

func freeTCPPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs `ledge serve` and returns when /readyz answers 200.
func (s *servedLedge) start() time.Time {
	s.t.Helper()
	begun := time.Now()
	exited := s.launch()
	client := http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(safety); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-exited:
			s.t.Fatalf("ledge serve exited before it was ready: %v\n%s", err, s.logs.Tail(20))
		default:
		}
		resp, err := client.Get("http://" + s.http + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ready := time.Now()
			s.readyTimes = append(s.readyTimes, ready.Sub(begun))
			return ready
		}
	}
	s.t.Fatalf("ledge serve not ready\n%s", s.logs.Tail(20))
	return time.Time{}
}

// shutdownDeadlineLog is what the node logs when a graceful stop waited
// its whole shutdown_timeout for requests or streams (node.Close).
const shutdownDeadlineLog = "shutdown deadline passed"

// launch runs `ledge serve` without waiting for it to be ready; the
// channel returned receives its exit.
func (s *servedLedge) launch() chan error {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "serve", "--data-dir", s.dir, "--listen", s.addr, "--http-listen", s.http)
	s.cmd.Env = append(os.Environ(), s.env...)
	s.cmd.Stdout = io.Discard
	s.cmd.Stderr = &s.logs
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	cmd, exited := s.cmd, make(chan error, 1)
	s.exited = exited
	go func() { exited <- cmd.Wait() }()
	s.t.Cleanup(func() { _ = cmd.Process.Kill() })
	return exited
}

// stop sends sig and waits for the exit. SIGTERM must end in status 0,
// without the node having waited out its shutdown deadline (whatever the
// clients did, nothing is left to wait for that long); its time to exit
// is kept.
func (s *servedLedge) stop(sig syscall.Signal) {
	s.t.Helper()
	sent := time.Now()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if sig == syscall.SIGTERM {
			s.shutdownTimes = append(s.shutdownTimes, time.Since(sent))
			if err != nil {
				s.t.Fatalf("ledge serve after SIGTERM: %v\n%s", err, s.logs.Tail(20))
			}
			if logs := s.logs.String()[s.checked:]; strings.Contains(logs, shutdownDeadlineLog) {
				s.t.Errorf("SIGTERM %d: the node waited out its shutdown deadline (%v to exit):\n%s",
					len(s.shutdownTimes), s.shutdownTimes[len(s.shutdownTimes)-1].Round(time.Millisecond), lastLines(logs, 30))
			}
		}
		s.checked = len(s.logs.String())
	case <-time.After(safety):
		s.t.Fatalf("ledge serve did not exit after %v\n%s", sig, s.logs.Tail(20))
	}
}

// lastLines returns the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// checkNoPanic fails the test if any run of the node panicked or died of
// a fatal error.
func (s *servedLedge) checkNoPanic() {
	s.t.Helper()
	logs := s.logs.String()
	for _, bad := range []string{"panic:", "fatal error:", "goroutine 1 ["} {
		if i := strings.Index(logs, bad); i >= 0 {
			s.t.Errorf("the node's stderr shows %q:\n%s", bad, logs[i:min(len(logs), i+2000)])
		}
	}
}

// run runs the binary as a client of the node (LEDGE_SERVER and the data
// dial connects an SDK client to the node as its admin (the data
// directory's CA and token), with opts.
func (s *servedLedge) dial(ctx context.Context, opts ...sdk.Option) *sdk.Client {
	s.t.Helper()
	c, err := sdk.Dial(ctx, s.addr, append([]sdk.Option{sdk.WithDataDir(s.dir)}, opts...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// directory's credentials), without waiting for it.
func (s *servedLedge) client(args ...string) *exec.Cmd {
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), "LEDGE_SERVER="+s.addr, "LEDGE_CA="+filepath.Join(s.dir, "tls", "ca.pem"))
	if tok, err := os.ReadFile(filepath.Join(s.dir, "admin.token")); err == nil {
		cmd.Env = append(cmd.Env, "LEDGE_TOKEN="+strings.TrimSpace(string(tok)))
	}
	return cmd
}

// median returns the median of ds and how many there were, for a report.
func median(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %v (min %v, max %v, %d runs)", s[len(s)/2].Round(time.Millisecond),
		s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}
