package e2e

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// TestAdminCallAfterRestart restarts `ledge serve`, by SIGKILL and by
// SIGTERM, under a client that sits idle meanwhile; the client's first
// request after each restart is an admin call, which must reconnect by
// itself and be answered. After a SIGKILL, that request is the packet the
// new node answers with a stateless reset; the call is a DescribeTopic of
// a one-letter topic, the smallest of packets, which quic-go would not
// answer with a reset if the node's connection IDs were short. The
// client's request timeout is a minute and the call's context 20 s: a
// client that only learns of the dead connection by waiting out its
// request timeout fails the call.
func TestAdminCallAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	node := newServedLedge(t, buildLedge(t), filepath.Join(t.TempDir(), "ledge-data"))
	node.start()
	defer node.checkNoPanic()
	ctx := context.Background()
	c := node.dial(ctx, sdk.WithRequestTimeout(time.Minute))
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "t", sdk.TopicConfig{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGKILL, syscall.SIGTERM} {
		node.stop(sig)
		node.start()
		callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		begun := time.Now()
		info, err := c.DescribeTopic(callCtx, "t")
		cancel()
		if err != nil {
			t.Fatalf("after a %v restart: the first DescribeTopic failed: %v", sig, err)
		}
		if got := len(info.Partitions); got != 2 {
			t.Fatalf("after a %v restart: DescribeTopic says %d partitions, want 2", sig, got)
		}
		t.Logf("%v restart: the first admin call answered in %v", sig, time.Since(begun).Round(time.Millisecond))
	}
}
