package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

const perMinutePkg = "../../sdk/plugin/examples/perminute"

// TestTransformStateSurvivesRestarts runs the kit's aggregating example,
// per-key counts per minute, as a transform while the node restarts
// between the records of one minute: the counts of the minute, output when
// a record of the next minute arrives, are every record's, once.
func TestTransformStateSurvivesRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	open := func() (*node.Node, *sdk.Client) {
		n := pluginNode(t, func(cfg *node.Config) { cfg.DataDir, cfg.Plugins.CallTimeout = dir, honestCallTimeout })
		return n, dial(t, n)
	}
	minute := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	record := func(key string, at time.Duration) *sdk.Record {
		return &sdk.Record{Key: []byte(key), Value: []byte("reading"), Timestamp: minute.Add(at)}
	}
	ctx := context.Background()
	n, c := open()
	createTopic(t, c, "readings", sdk.TopicConfig{Partitions: 1, Durability: sdk.DurabilityAlways})
	createTopic(t, c, "per-minute", sdk.TopicConfig{Partitions: 1, Durability: sdk.DurabilityAlways})
	if _, err := c.AddPlugin(ctx, "perminute", sdk.PluginTransform, buildPlugin(t, perMinutePkg)); err != nil {
		t.Fatal(err)
	}
	if err := c.AddTransform(ctx, "minutes", sdk.TransformConfig{Plugin: "perminute", From: "readings", To: "per-minute"}); err != nil {
		t.Fatal(err)
	}
	caughtUp := func(c *sdk.Client, committed uint64) {
		t.Helper()
		for deadline := time.Now().Add(safety); ; time.Sleep(10 * time.Millisecond) {
			tr, err := c.TransformStatus(ctx, "minutes")
			if err == nil && len(tr.Partitions) == 1 && tr.Partitions[0].Committed == committed {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the transform never committed %d: %+v, %v", committed, tr, err)
			}
		}
	}
	// Three records of minute 7:00, the node restarting after each batch.
	for i, batch := range [][]*sdk.Record{
		{record("lyon", time.Second), record("oslo", 2*time.Second)},
		{record("lyon", 20*time.Second)},
		{record("lyon", 59*time.Second), record("oslo", 59*time.Second)},
	} {
		produce(t, c, "readings", batch...)
		committed := []uint64{2, 3, 5}[i]
		caughtUp(c, committed)
		_ = c.Close()
		if err := n.Close(ctx); err != nil {
			t.Fatal(err)
		}
		n, c = open()
	}
	// A record of 7:01 closes the minute: its counts are output.
	produce(t, c, "readings", record("lyon", time.Minute+time.Second))
	caughtUp(c, 6)
	got := values(t, c, "per-minute")
	want := []string{
		fmt.Sprintf(`{"minute":%d,"key":"lyon","count":3}`, minute.UnixMilli()),
		fmt.Sprintf(`{"minute":%d,"key":"oslo","count":2}`, minute.UnixMilli()),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("per-minute counts:\n got %q\nwant %q", got, want)
	}
}
