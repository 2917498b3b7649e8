package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// safety bounds every wait: it only turns a hang into a failure, no test
// relies on it.
const safety = 60 * time.Second

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	return ctx
}

// startNode opens a node on 127.0.0.1:0 in a temporary data directory.
func startNode(t testing.TB, tweak func(*node.Config)) *node.Node {
	t.Helper()
	cfg := node.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", RetentionInterval: -1}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := node.Open(testContext(t), cfg)
	if err != nil {
		t.Fatalf("node.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(testContext(t)); err != nil {
			t.Errorf("node.Close: %v", err)
		}
	})
	return n
}

// dial connects an SDK client to n with its data directory's credentials.
func dial(t testing.TB, n *node.Node, opts ...sdk.Option) *sdk.Client {
	t.Helper()
	c, err := sdk.Dial(testContext(t), n.Addr(), append([]sdk.Option{sdk.WithDataDir(n.Paths().DataDir)}, opts...)...)
	if err != nil {
		t.Fatalf("sdk.Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func createTopic(t testing.TB, c *sdk.Client, name string, cfg sdk.TopicConfig) sdk.TopicInfo {
	t.Helper()
	info, err := c.CreateTopic(testContext(t), name, cfg)
	if err != nil {
		t.Fatalf("CreateTopic %s: %v", name, err)
	}
	return info
}

// servedNode starts a node as startNode does and returns a context
// bounding the test and a dial function: each call connects a new SDK
// client with the node's admin credentials.
func servedNode(t *testing.T) (context.Context, func() *sdk.Client) {
	t.Helper()
	n := startNode(t, nil)
	return testContext(t), func() *sdk.Client {
		t.Helper()
		return dial(t, n)
	}
}
