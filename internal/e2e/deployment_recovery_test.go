package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// TestSigtermDuringRecoveryOnAFullDisk: a node killed with its disk full
// restarts on a disk with no byte left (its reserve given up already),
// where its recovery waits for room. SIGTERM stops it there: exit status
// 0, "stopped during start-up". Once space is freed it starts and serves
// every record it acknowledged, to a client of the new process, and
// takes appends again. The disk is the node's own file system
// limited through LEDGE_TEST_DISK, so the test needs no root.
func TestSigtermDuringRecoveryOnAFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	disk := newLimitedDisk(t, 1<<30)
	node := newServedLedge(t, buildLedge(t), filepath.Join(disk.dir, "ledge-data"))
	node.env = disk.env()
	node.start()
	defer node.checkNoPanic()
	ctx := testContext(t)
	c := node.dial(ctx)
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "t", sdk.TopicConfig{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var acked []string
	for i := range 300 {
		v := "before-" + strconv.Itoa(i)
		if err := p.ProduceSync(ctx, &sdk.Record{Key: []byte(strconv.Itoa(i % 5)), Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, v)
	}

	// The disk fills; a write finds it full, and the node gives its
	// reserve to the metadata store. Killed so, it restarts with no room.
	disk.fill(t, node)
	produceCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	cmd := node.client("produce", "t")
	cmd = exec.CommandContext(produceCtx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = node.client().Env
	cmd.Stdin = strings.NewReader(strings.Repeat("refused\n", 100))
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("produce on a full disk succeeded: %s", out)
	}
	cancel()
	wantMetric(t, node, "ledge_disk_full", "1")
	node.stop(syscall.SIGKILL)

	node.launch()
	node.waitLog("metadata: background error")
	node.stop(syscall.SIGTERM)
	if !strings.Contains(node.logs.String(), "stopped during start-up") {
		t.Fatalf("SIGTERM during recovery on a full disk:\n%s", node.logs.Tail(10))
	}

	disk.writeControl(t, strconv.FormatInt(disk.size, 10)) // space freed while the node is down
	node.start()
	c2 := node.dial(ctx)
	defer c2.Close()
	got := map[string]bool{}
	for _, r := range readAll(ctx, t, c2, "t") {
		got[string(r.Value)] = true
	}
	for _, v := range acked {
		if !got[v] {
			t.Errorf("acknowledged %s lost", v)
		}
	}
	p2, err := c2.NewProducer(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.ProduceSync(ctx, &sdk.Record{Value: []byte("after")}); err != nil {
		t.Errorf("produce once space is freed: %v", err)
	}
	node.stop(syscall.SIGTERM)
}
