package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// Set in the environment, nodeAddr and nodeDir make the test binary run
// a node (see TestMain) that a test can SIGKILL: the node code under test,
// in another process, without a separate build.
const (
	nodeAddr = "LEDGE_E2E_NODE_ADDR"
	nodeDir  = "LEDGE_E2E_NODE_DIR"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(nodeAddr); addr != "" {
		runNodeProcess(addr, os.Getenv(nodeDir))
		return
	}
	code := m.Run()
	if ledgeBinary.dir != "" {
		os.RemoveAll(ledgeBinary.dir)
	}
	os.Exit(code)
}

// runNodeProcess serves a node until the process is killed.
func runNodeProcess(addr, dir string) {
	n, err := node.Open(context.Background(), node.Config{DataDir: dir, Listen: addr, RetentionInterval: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "node.Open:", err)
		os.Exit(1)
	}
	fmt.Println("listening on", n.Addr())
	select {}
}

// freeUDPPort returns a loopback address whose UDP port was free a moment
// ago, so a restarted node can listen where clients expect it.
func freeUDPPort(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().String()
}

// serveProcess runs a node on addr with dataDir in a child process and
// waits until it listens. The process is SIGKILLed at cleanup if still
// running.
func serveProcess(t *testing.T, addr, dataDir string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), nodeAddr+"="+addr, nodeDir+"="+dataDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") {
				up <- true
			}
		}
		close(up)
	}()
	select {
	case ok := <-up:
		if !ok {
			t.Fatalf("ledge serve ended before listening\n%s", stderr.String())
		}
	case <-time.After(safety):
		t.Fatalf("ledge serve did not start\n%s", stderr.String())
	}
	return cmd
}

// testWriter sends log lines to t.Log.
type testWriter struct {
	t     *testing.T
	start time.Time
}

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%v: %s", time.Since(w.start).Round(time.Millisecond), bytes.TrimSpace(b))
	return len(b), nil
}

// TestProducerSurvivesNodeKill kills the node (SIGKILL) while an
// idempotent producer has batches in flight on a durability "always"
// topic, and restarts it on the same address. The producer reconnects and
// resends what was not acknowledged: every acknowledged record is there,
// once, at its acknowledged offset, in production order; records the
// producer gave up on are there at most once.
func TestProducerSurvivesNodeKill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledge-data")
	addr := freeUDPPort(t)
	proc := serveProcess(t, addr, dir)
	ctx := testContext(t)
	start := time.Now()
	logger := slog.New(slog.NewTextHandler(testWriter{t, start}, nil))
	c, err := sdk.Dial(ctx, addr, sdk.WithDataDir(dir), sdk.WithRequestTimeout(2*time.Second), sdk.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "k", sdk.TopicConfig{Partitions: 2, Durability: sdk.DurabilityAlways}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "k", sdk.WithMaxBatchRecords(20), sdk.WithMaxInFlight(160))
	if err != nil {
		t.Fatal(err)
	}

	const total = 20000
	type outcome struct {
		partition int32
		offset    uint64
		err       error
	}
	var (
		mu       sync.Mutex
		outcomes = make(map[string]outcome, total)
		acked    atomic.Int64
		halfway  = make(chan struct{})
		once     sync.Once
	)
	for i := range total {
		v := fmt.Sprintf("r%05d", i)
		p.Produce(ctx, &sdk.Record{Key: []byte(fmt.Sprint(i % 13)), Value: []byte(v)}, func(r *sdk.Record, err error) {
			mu.Lock()
			outcomes[v] = outcome{r.Partition, r.Offset, err}
			mu.Unlock()
			if err == nil && acked.Add(1) == total/4 {
				once.Do(func() { close(halfway) })
			}
		})
		if i == total/2 {
			select {
			case <-halfway:
			case <-ctx.Done():
				t.Fatal("no acknowledgements")
			}
			t.Logf("%v: killing the node", time.Since(start))
			if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = proc.Wait()
			serveProcess(t, addr, dir)
			t.Logf("%v: restarted", time.Since(start))
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: all acknowledged", time.Since(start))
	mu.Lock()
	defer mu.Unlock()
	for v, o := range outcomes {
		if o.err != nil && !errors.Is(o.err, sdk.ErrUnknownOutcome) {
			t.Fatalf("%s failed: %v", v, o.err)
		}
	}

	cons, err := c.NewConsumer(ctx, "k", sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	last := map[int32]string{}
	for {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			v := string(r.Value)
			o, ok := outcomes[v]
			switch {
			case !ok:
				t.Fatalf("%s was never produced", v)
			case seen[v]:
				t.Fatalf("%s is in the log twice (offset %d)", v, r.Offset)
			case o.partition != r.Partition:
				t.Fatalf("%s in partition %d, produced to %d", v, r.Partition, o.partition)
			case o.err == nil && o.offset != r.Offset:
				t.Fatalf("%s acknowledged at offset %d, read at %d", v, o.offset, r.Offset)
			case v < last[r.Partition]:
				t.Fatalf("partition %d: %s after %s", r.Partition, v, last[r.Partition])
			}
			seen[v], last[r.Partition] = true, v
		}
	}
	for v, o := range outcomes {
		if o.err == nil && !seen[v] {
			t.Fatalf("acknowledged %s is missing after the crash", v)
		}
	}
	t.Logf("%d records acknowledged, %d read back", acked.Load(), len(seen))
}
