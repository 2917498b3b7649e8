package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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

	"github.com/ledgemq/ledge/sdk"
)

// buildLedge builds the ledge binary into a temporary directory.
func buildLedge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ledge")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../cmd/ledge")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
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

// serveProcess runs `ledge serve` on addr with dataDir and waits until it
// listens. The process is SIGKILLed at cleanup if still running.
func serveProcess(t *testing.T, bin, addr, dataDir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir)
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

// TestProducerSurvivesNodeKill kills the node (SIGKILL) while an
// idempotent producer has batches in flight on a durability "always"
// topic, and restarts it on the same address. The producer reconnects and
// resends what was not acknowledged: every acknowledged record is there,
// once, at its acknowledged offset, in production order; records the
// producer gave up on are there at most once.
func TestProducerSurvivesNodeKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills a node")
	}
	bin := buildLedge(t)
	dir := filepath.Join(t.TempDir(), "ledge-data")
	addr := freeUDPPort(t)
	proc := serveProcess(t, bin, addr, dir)
	ctx := testContext(t)
	c, err := sdk.Dial(ctx, addr, sdk.WithDataDir(dir), sdk.WithRequestTimeout(5*time.Second))
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
			if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = proc.Wait()
			serveProcess(t, bin, addr, dir)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
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
