package e2e

import (
	"bufio"
	"flag"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

var lifecycleRuns = flag.Int("lifecycle.runs", 1, "runs per kind of client in TestShutdownWhateverTheClients, restarts per signal in TestRestartResume and restarts in TestRestartWithPlugins (5 for the figures of docs/OPERATIONS.md)")

// TestShutdownWhateverTheClients stops `ledge serve` with SIGTERM while
// clients of each kind are attached: none, a named `consume --follow`, a
// group member following, and clients that vanished without closing (a
// producer, a named follower and a group member, killed). Each time the
// node exits with status 0 and nothing acknowledged is lost across the
// restart; the time from SIGTERM to exit is reported for each kind
// (-lifecycle.runs 5 for medians).
func TestShutdownWhateverTheClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	bin := buildLedge(t)
	kinds := []struct {
		name   string
		attach func(t *testing.T, node *servedLedge) (vanish bool, cmds []*exec.Cmd)
	}{
		{"no client", func(*testing.T, *servedLedge) (bool, []*exec.Cmd) { return false, nil }},
		{"named consume --follow", func(t *testing.T, n *servedLedge) (bool, []*exec.Cmd) {
			return false, []*exec.Cmd{n.client("consume", "events", "--consumer", "tail", "--follow")}
		}},
		{"group member --follow", func(t *testing.T, n *servedLedge) (bool, []*exec.Cmd) {
			return false, []*exec.Cmd{n.client("consume", "events", "--group", "g", "--follow")}
		}},
		{"vanished producer, follower and group member", func(t *testing.T, n *servedLedge) (bool, []*exec.Cmd) {
			return true, []*exec.Cmd{
				n.client("produce", "events"),
				n.client("consume", "events", "--consumer", "gone", "--follow"),
				n.client("consume", "events", "--group", "gone", "--follow"),
			}
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			node := newServedLedge(t, bin, filepath.Join(t.TempDir(), "ledge-data"))
			node.start()
			defer node.checkNoPanic()
			ctx := testContext(t)
			c := node.dial(ctx)
			defer c.Close()
			if _, err := c.CreateTopic(ctx, "events", sdk.TopicConfig{Partitions: 2}); err != nil {
				t.Fatal(err)
			}
			p, err := c.NewProducer(ctx, "events")
			if err != nil {
				t.Fatal(err)
			}
			acked := 0
			for range *lifecycleRuns {
				vanish, cmds := kind.attach(t, node)
				for _, cmd := range cmds {
					attach(t, cmd)
				}
				if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte("before the stop")}); err != nil {
					t.Fatal(err)
				}
				acked++
				time.Sleep(200 * time.Millisecond) // followers parked again
				if vanish {
					for _, cmd := range cmds {
						_ = cmd.Process.Kill()
						_ = cmd.Wait()
					}
				}
				node.stop(syscall.SIGTERM)
				for _, cmd := range cmds {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
				node.start()
			}
			if got := len(readAll(ctx, t, c, "events")); got < acked {
				t.Errorf("%d records after the restarts, %d acknowledged", got, acked)
			}
			t.Logf("%s: SIGTERM to exit %s", kind.name, median(node.shutdownTimes))
			node.stop(syscall.SIGTERM)
		})
	}
}

// attach starts a CLI client and returns once it is connected: a producer
// is fed a line and keeps its stdin open; a consumer has printed or is
// waiting.
func attach(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if cmd.Args[1] == "produce" {
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			w := bufio.NewWriter(in)
			_, _ = io.WriteString(w, strings.Repeat("x", 10)+"\n")
			_ = w.Flush() // stdin stays open: the producer stays connected
		}()
	} else if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	time.Sleep(300 * time.Millisecond) // connected, parked
}
