package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ledgemq/ledge/internal/syncbuf"
	"github.com/ledgemq/ledge/transport/wire"
)

// serveProcess is `ledge serve` running as a child process.
type serveProcess struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncbuf.Buffer
	exited chan error
}

// buildLedge builds the ledge binary into a temporary directory.
func buildLedge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ledge")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/ledgemq/ledge/cmd/ledge")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var listeningLine = regexp.MustCompile(`listening on (\S+) \(QUIC\)`)

// startServe runs `ledge serve` on dir and an ephemeral port, and waits
// for it to print its address.
func startServe(t *testing.T, bin, dir string) *serveProcess {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, stderr: &syncbuf.Buffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case p.addr = <-addr:
	case err := <-p.exited:
		t.Fatalf("ledge serve exited before listening: %v\n%s", err, p.stderr)
	case <-safetyContext(t).Done():
		t.Fatalf("ledge serve did not start listening\n%s", p.stderr)
	}
	return p
}

// TestE2ECrashKeepsAcknowledged kills `ledge serve` (SIGKILL) while a
// producer streams batches to a topic with durability always; after a
// restart every acknowledged record is there, at the offsets its
// acknowledgement gave.
func TestE2ECrashKeepsAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	bin := buildLedge(t)
	dir := filepath.Join(t.TempDir(), "data")
	srv := startServe(t, bin, dir)
	caFile, admin := servedCredentials(t, dir)
	c, err := dialNode(t, srv.addr, caFile, admin)
	if err != nil {
		t.Fatal(err)
	}
	c.createTopic("crash", wire.TopicConfig{Durability: wire.DurabilityAlways})
	var id wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{Name: "crasher"}, &id)

	// The producer pipelines batches of 5 records until the connection
	// dies; the node is killed once 100 batches are acknowledged, with
	// more in flight.
	const perBatch, killAfter = 5, 100
	type ack struct {
		batch      int
		base, last uint64
	}
	var (
		mu    sync.Mutex
		acked []ack
	)
	enough := make(chan struct{})
	stream := c.stream()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; ; i++ {
			vals := make([]string, perBatch)
			for r := range vals {
				vals[r] = fmt.Sprintf("b%05d-r%d", i, r)
			}
			b := batch(t, id.ProducerID, id.ProducerEpoch, int32(i*perBatch), vals...)
			err := stream.Send(safetyContext(t), c.frame(&wire.ProduceRequest{Topic: "crash", Batch: b}), func(f []byte, err error) {
				var rep wire.ProduceReply
				if err == nil && decodeReply(f, &rep) == nil {
					mu.Lock()
					acked = append(acked, ack{i, rep.BaseOffset, rep.LastOffset})
					if len(acked) == killAfter {
						close(enough)
					}
					mu.Unlock()
				}
			})
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-enough:
	case <-safetyContext(t).Done():
		t.Fatal("the producer got no acknowledgements")
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-srv.exited
	// A killed node sends nothing more: end the client's side at once
	// rather than at its idle timeout.
	_ = c.conn.Close()
	<-sent
	mu.Lock()
	got := append([]ack(nil), acked...)
	mu.Unlock()
	t.Logf("%d batches acknowledged before the kill", len(got))

	// Restart on the same data directory and read everything back.
	srv2 := startServe(t, bin, dir)
	r, err := dialNode(t, srv2.addr, caFile, admin)
	if err != nil {
		t.Fatal(err)
	}
	var st wire.GetPartitionStateReply
	r.mustCall(&wire.GetPartitionStateRequest{Topic: "crash"}, &st)
	hw := st.Partitions[0].HighWatermark
	byOffset := map[uint64]string{}
	for next := st.Partitions[0].StartOffset; next < hw; {
		p := r.pollOne(r.main, wire.Consumer{}, "crash", wire.Position{Mode: wire.PositionOffset, Offset: next}, 0)
		if p.Status != wire.StatusOK {
			t.Fatalf("poll at %d: %s %s", next, p.Status, p.Message)
		}
		for _, v := range values(t, p.Batches) {
			var off uint64
			var val string
			if _, err := fmt.Sscanf(v, "%d:%s", &off, &val); err != nil {
				t.Fatal(err)
			}
			byOffset[off] = val
		}
		if p.Next <= next {
			t.Fatalf("poll at %d made no progress", next)
		}
		next = p.Next
	}
	for _, a := range got {
		for r := range perBatch {
			want := fmt.Sprintf("b%05d-r%d", a.batch, r)
			if have := byOffset[a.base+uint64(r)]; have != want {
				t.Fatalf("acknowledged record %s at offset %d: found %q after the restart", want, a.base+uint64(r), have)
			}
		}
	}

	// The restarted node stops gracefully on SIGTERM.
	if err := srv2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-srv2.exited; err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("ledge serve exited with %v after SIGTERM\n%s", err, srv2.stderr)
		}
		t.Fatal(err)
	}
}

// servedCredentials returns the CA file and the admin token that a
// `ledge serve` on data directory dir created at its first start.
func servedCredentials(t testing.TB, dir string) (caFile, adminToken string) {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(dir, AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, TLSDir, "ca.pem"), strings.TrimSpace(string(token))
}
