package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ledgemq/ledge/bench/internal/sysstat"
)

// Kind names a server variant: one column of the comparison.
type Kind string

// The server variants.
const (
	Ledge   Kind = "ledge"    // Ledge node over QUIC (always TLS 1.3)
	NATS    Kind = "nats"     // NATS JetStream, plain TCP
	NATSTLS Kind = "nats-tls" // NATS JetStream, TLS 1.3
	// Kafka is a Ledge node with its Kafka listener on, written to by a
	// Kafka client (franz-go) over plain TCP.
	Kafka Kind = "kafka"
)

// Tier is a durability tier; the comparison never crosses tiers.
type Tier string

// The durability tiers.
const (
	// T0 acknowledges from the page cache: JetStream's default file store
	// (sync_interval 2 min) and Ledge's policy none.
	T0 Tier = "T0"
	// T1 acknowledges after fsync: JetStream sync_interval always and
	// Ledge's policy always (group commit).
	T1 Tier = "T1"
)

// Binaries are the built server executables.
type Binaries struct {
	Ledge string
	NATSD string
	// RawSink is bench/cmd/rawsink, the far end of the WAN ceilings.
	RawSink string
	// LedgeProf, when set, runs the Ledge node with profiling
	// (bench/cmd/ledgeprof) in place of `ledge serve --cpuprofile`, for a
	// ledge binary older than that flag.
	LedgeProf string
	// FilterPlugin is the filter plugin the filtered replay runs on the
	// Ledge node: sdk/plugin/examples/jsonfilter built for wasip1.
	FilterPlugin string
}

// Build compiles cmd/ledge of the parent module (repoRoot), cmd/natsd of
// the bench module (benchRoot) and the filter plugin into dir, with cgo
// off like a release. A non-empty ledgeBin or natsdBin is used as it is
// instead.
func Build(ctx context.Context, repoRoot, benchRoot, dir, ledgeBin, natsdBin string) (Binaries, error) {
	b := Binaries{Ledge: filepath.Join(dir, "ledge"), NATSD: filepath.Join(dir, "natsd"), RawSink: filepath.Join(dir, "rawsink"),
		FilterPlugin: filepath.Join(dir, "jsonfilter.wasm")}
	for _, s := range []struct {
		root, pkg, out, given string
		wasm                  bool // a plugin: a WASI reactor
	}{
		{root: repoRoot, pkg: "./cmd/ledge", out: b.Ledge, given: ledgeBin},
		{root: benchRoot, pkg: "./cmd/natsd", out: b.NATSD, given: natsdBin},
		{root: benchRoot, pkg: "./cmd/rawsink", out: b.RawSink},
		{root: repoRoot, pkg: "./sdk/plugin/examples/jsonfilter", out: b.FilterPlugin, wasm: true},
	} {
		if s.given != "" {
			abs, err := filepath.Abs(s.given)
			if err != nil {
				return b, err
			}
			if _, err := os.Stat(abs); err != nil {
				return b, err
			}
			if s.pkg == "./cmd/ledge" {
				b.Ledge = abs
			} else {
				b.NATSD = abs
			}
			continue
		}
		args := []string{"build", "-trimpath", "-o", s.out} // profiles name modules, not the machine's paths
		env := append(os.Environ(), "CGO_ENABLED=0")
		if s.wasm {
			args = append(args, "-buildmode=c-shared")
			env = append(env, "GOOS=wasip1", "GOARCH=wasm")
		}
		cmd := exec.CommandContext(ctx, "go", append(args, s.pkg)...)
		cmd.Dir = s.root
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("server: go build %s in %s: %w\n%s", s.pkg, s.root, err, out)
		}
	}
	return b, nil
}

// Spec says how to run one server.
type Spec struct {
	Kind    Kind
	Tier    Tier
	DataDir string // fresh or reused (Restart); created when missing
	Host    string // listen address without port: 127.0.0.1, or an address inside Netns
	CPUs    []int  // CPU mask; nil = unpinned
	Procs   int    // GOMAXPROCS
	Netns   string // run inside this network namespace (ip netns exec)
	LogDir  string // where stdout and stderr go
	Env     []string
	// Profile, for Ledge with Binaries.LedgeProf, is the path of the CPU
	// profile written when the node stops.
	Profile string
}

// Proc is a running server.
type Proc struct {
	Spec Spec
	Addr string // host:port the clients dial
	// KafkaAddr is the Kafka listener of a Kafka node (Addr is its QUIC
	// listener, for the topic's creation).
	KafkaAddr string
	// HTTPAddr is a Ledge node's HTTP listener (status, metrics, pprof
	// when enabled), once it has printed it.
	HTTPAddr atomic.Pointer[string]
	CAFile   string // for the TLS variants
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // the exit status, once done is closed
	log      string
}

var (
	listenRE = regexp.MustCompile(`listening on (\S+)`)
	httpRE   = regexp.MustCompile(`Status page: http://(\S+)/`)
	kafkaRE  = regexp.MustCompile(`Kafka listener: (\S+)`)
)

// Start starts a server and waits until it prints its address.
func Start(ctx context.Context, bins Binaries, spec Spec) (*Proc, error) {
	if err := os.MkdirAll(spec.DataDir, 0o700); err != nil {
		return nil, err
	}
	var args []string
	p := &Proc{Spec: spec, done: make(chan struct{})}
	switch spec.Kind {
	case Ledge, Kafka:
		dd := filepath.Join(spec.DataDir, "ledge-data")
		// Both listeners on free ports: a node already running on this
		// machine (on the default 7420 and 7421) must not fail the run.
		args = []string{bins.Ledge, "serve", "--data-dir", dd, "--listen", spec.Host + ":0", "--http-listen", spec.Host + ":0"}
		switch {
		case spec.Profile != "" && bins.LedgeProf != "":
			args = []string{bins.LedgeProf, "--data-dir", dd, "--listen", spec.Host + ":0", "--cpuprofile", spec.Profile}
		case spec.Profile != "":
			args = append(args, "--cpuprofile", spec.Profile)
		}
		if spec.Host != "127.0.0.1" {
			args = append(args, "--cert-addrs", spec.Host)
		}
		if spec.Kind == Kafka {
			args = append(args, "--kafka-listen", spec.Host+":0")
		}
		p.CAFile = filepath.Join(dd, "tls", "ca.pem")
	case NATS, NATSTLS:
		sync := "default"
		if spec.Tier == T1 {
			sync = "always"
		}
		args = []string{bins.NATSD, "--store", spec.DataDir, "--listen", spec.Host + ":0", "--sync", sync}
		if spec.Kind == NATSTLS {
			args = append(args, "--tls")
			p.CAFile = filepath.Join(spec.DataDir, "ca.pem")
		}
	default:
		return nil, fmt.Errorf("server: unknown kind %q", spec.Kind)
	}
	if spec.Netns != "" {
		args = append([]string{"ip", "netns", "exec", spec.Netns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = spec.DataDir
	cmd.Env = append(os.Environ(), spec.Env...)
	if spec.Procs > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(spec.Procs))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logDir := spec.LogDir
	if logDir == "" {
		logDir = spec.DataDir
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	p.log = filepath.Join(logDir, fmt.Sprintf("%s-%s-%d.log", spec.Kind, spec.Tier, time.Now().UnixNano()))
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := sysstat.StartPinned(cmd, spec.CPUs); err != nil {
		logf.Close()
		return nil, fmt.Errorf("server: start %s: %w", spec.Kind, err)
	}
	p.cmd = cmd
	// The node prints its QUIC address, then its Kafka listener's.
	addr := make(chan string, 1)
	var once sync.Once
	var quicAddr string
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := httpRE.FindStringSubmatch(line); m != nil {
				p.HTTPAddr.Store(&m[1])
			}
			if m := listenRE.FindStringSubmatch(line); m != nil {
				if spec.Kind != Kafka {
					once.Do(func() { addr <- m[1] })
				}
				quicAddr = m[1]
			}
			if m := kafkaRE.FindStringSubmatch(line); m != nil && spec.Kind == Kafka && quicAddr != "" {
				p.KafkaAddr = m[1]
				once.Do(func() { addr <- quicAddr })
			}
		}
		_, _ = io.Copy(logf, stdout)
	}()
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	select {
	case a := <-addr:
		p.Addr = a
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("server: %s exited before listening (%v): %s", spec.Kind, p.err, p.LogTail())
	case <-time.After(60 * time.Second):
		p.Kill()
		return nil, fmt.Errorf("server: %s did not print its address in 60s: %s", spec.Kind, p.LogTail())
	case <-ctx.Done():
		p.Kill()
		return nil, context.Cause(ctx)
	}
}

// PID is the server's process id (the same after ip netns exec, which
// execs in place).
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Sample reads the server's counters.
func (p *Proc) Sample() (sysstat.Sample, error) { return sysstat.Read(p.PID()) }

// Alive reports whether the process has not exited.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop asks the server to stop (SIGTERM) and kills it after timeout.
func (p *Proc) Stop(timeout time.Duration) error {
	if !p.Alive() {
		return p.exitErr()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("server: %s did not stop within %v; killed", p.Spec.Kind, timeout)
	}
}

// Kill ends the server at once.
func (p *Proc) Kill() {
	if p.Alive() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *Proc) exitErr() error {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return p.err
}

// LogTail returns the last lines the server logged.
func (p *Proc) LogTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// LogFile is the path of the server's log.
func (p *Proc) LogFile() string { return p.log }

// DirBytes returns the bytes of the regular files under dir: the
// server's footprint on disk.
func DirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// StartSink starts bench/cmd/rawsink (proto tcp or quic) on host inside
// netns and returns its address and what stops it.
func StartSink(ctx context.Context, bins Binaries, proto, host, netns string) (string, func(), error) {
	return StartRaw(ctx, bins, RawSpec{Proto: proto, Host: host, Netns: netns})
}

// RawSpec says where and how to run bench/cmd/rawsink.
type RawSpec struct {
	Proto, Host, Netns string
	CPUs               []int         // CPU mask; nil = unpinned
	Procs              int           // GOMAXPROCS; 0 = Go's default
	Source             time.Duration // QUIC: send for this long per stream instead of reading
	OwnSocket          bool          // QUIC: quic-go's own socket, not the one Ledge reads through
}

// StartRaw starts bench/cmd/rawsink as spec says and returns its address
// and what stops it.
func StartRaw(ctx context.Context, bins Binaries, spec RawSpec) (string, func(), error) {
	proto, host, netns := spec.Proto, spec.Host, spec.Netns
	args := []string{bins.RawSink, "--proto", proto, "--listen", host + ":0"}
	if spec.Source > 0 {
		args = append(args, "--source", spec.Source.String())
	}
	if spec.OwnSocket {
		args = append(args, "--own-socket")
	}
	if netns != "" {
		args = append([]string{"ip", "netns", "exec", netns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	if spec.Procs > 0 {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(spec.Procs))
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := sysstat.StartPinned(cmd, spec.CPUs); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			stop()
			return "", nil, fmt.Errorf("server: rawsink %s exited before listening", proto)
		}
		return a, stop, nil
	case <-time.After(30 * time.Second):
		stop()
		return "", nil, fmt.Errorf("server: rawsink %s did not listen in 30s", proto)
	case <-ctx.Done():
		stop()
		return "", nil, context.Cause(ctx)
	}
}
