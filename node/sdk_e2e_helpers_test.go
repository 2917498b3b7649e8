package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// servedNode starts a node on a loopback port in a fresh data directory,
// with retention left to the test, and returns a context bounding the
// test and a dial function: each call connects a new SDK client with the
// node's admin credentials. Node and clients close when the test ends.
func servedNode(t *testing.T) (context.Context, func() *sdk.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	dir := t.TempDir()
	n, err := node.Open(ctx, node.Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	return ctx, func() *sdk.Client {
		t.Helper()
		c, err := sdk.Dial(ctx, n.Addr(), sdk.WithDataDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}
