package sdk_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
	"github.com/ledgemq/ledge/transport/quic"
)

// A node at its connection limit refuses a device's dial; the device
// does not give up (nor hammer the node): it pauses, dials again, and
// connects once the node has room.
func TestDialRefusedForLoadConnectsOnceTheNodeHasRoom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "ledge-data")
	n, err := node.Open(ctx, node.Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1,
		Transport: quic.Config{MaxConns: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	first, err := sdk.Dial(ctx, n.Addr(), sdk.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}

	dialed := make(chan error, 1)
	var second *sdk.Client
	go func() {
		var err error
		second, err = sdk.Dial(ctx, n.Addr(), sdk.WithDataDir(dir), sdk.WithDialTimeout(time.Minute))
		dialed <- err
	}()
	// The node refuses it, and again, while the first holds the one place.
	for n.Snapshot(ops.OffsetsOnly).Transport.RefusedLimit < 2 {
		select {
		case err := <-dialed:
			t.Fatalf("Dial returned (%v) while the node was full", err)
		case <-ctx.Done():
			t.Fatal("the node never refused the second client")
		case <-time.After(10 * time.Millisecond):
		}
	}
	first.Close()
	if err := <-dialed; err != nil {
		t.Fatalf("Dial once the node had room: %v", err)
	}
	defer second.Close()
	if _, err := second.ListTopics(ctx); err != nil {
		t.Fatalf("the client that waited for room: %v", err)
	}
}
