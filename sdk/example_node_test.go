package sdk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
)

// The examples with an Output section run against a node this test binary
// starts in a temporary directory, as `ledge serve` would there. Beside a
// node on its default address, sdk.Dial(ctx, "") finds it and its
// ./ledge-data without options; the examples name the address and the
// data directory of this one, which listens on a free port. (Only the
// tests import node; the sdk itself never does.)
var (
	nodeAddr    string
	nodeDataDir string
)

func TestMain(m *testing.M) {
	os.Exit(runWithExampleNode(m))
}

func runWithExampleNode(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ledge-sdk-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	nodeDataDir = filepath.Join(dir, "ledge-data")
	n, err := node.Open(ctx, node.Config{DataDir: nodeDataDir, Listen: "127.0.0.1:0", RetentionInterval: -1})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the examples' node:", err)
		return 1
	}
	nodeAddr = n.Addr()
	code := m.Run()
	if err := n.Close(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "closing the examples' node:", err)
	}
	return code
}
