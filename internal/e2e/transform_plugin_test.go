package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

const envelopePkg = "../../node/transform/testdata/envelope"

// TestTransformPluginFailureHoldsTheInput: a transform whose plugin runs
// past its deadline (and, in the second run, traps) on one record moves
// nothing past it: the status says the failure as the plugin host says a
// filter's, the output holds what came before, and the input offset stays
// at the failing batch. Once the transform runs a plugin that answers,
// everything is output once.
//
// Only the spinning run is about the deadline; the trapping one has a
// deadline no loaded machine makes an honest call miss. Neither is about
// quarantine: the plugin may fail many times before the test replaces
// its parameters, and must not be quarantined meanwhile.
//
// covers: G93
func TestTransformPluginFailureHoldsTheInput(t *testing.T) {
	for _, mode := range []struct {
		mode, says  string
		callTimeout time.Duration
	}{{"spin", "deadline of 200ms", 200 * time.Millisecond}, {"trap", "trap", honestCallTimeout}} {
		t.Run(mode.mode, func(t *testing.T) {
			n := pluginNode(t, func(cfg *node.Config) {
				cfg.Plugins.CallTimeout, cfg.Plugins.MaxStrikes = mode.callTimeout, 1000
			})
			c := dial(t, n)
			ctx := testContext(t)
			createTopic(t, c, "raw", sdk.TopicConfig{Partitions: 1})
			createTopic(t, c, "wrapped", sdk.TopicConfig{Partitions: 1})
			if _, err := c.AddPlugin(ctx, "envelope", sdk.PluginTransform, buildPlugin(t, envelopePkg)); err != nil {
				t.Fatal(err)
			}
			produce(t, c, "raw", &sdk.Record{Value: []byte(`1`)}, &sdk.Record{Value: []byte(`2`)})
			cfg := sdk.TransformConfig{Plugin: "envelope", From: "raw", To: "wrapped",
				Params: map[string]string{"fail": "bad", "fail-mode": mode.mode}}
			if err := c.AddTransform(ctx, "wrap", cfg); err != nil {
				t.Fatal(err)
			}
			status := func(cond func(sdk.TransformPartition) bool) sdk.TransformPartition {
				t.Helper()
				for deadline := time.Now().Add(safety); ; time.Sleep(10 * time.Millisecond) {
					tr, err := c.TransformStatus(ctx, "wrap")
					if err != nil {
						t.Fatal(err)
					}
					if len(tr.Partitions) == 1 && cond(tr.Partitions[0]) {
						return tr.Partitions[0]
					}
					if time.Now().After(deadline) {
						t.Fatalf("status never as expected: %+v", tr)
					}
				}
			}
			status(func(p sdk.TransformPartition) bool { return p.Committed == 2 && p.Lag == 0 })
			produce(t, c, "raw", &sdk.Record{Value: []byte(`bad`)}, &sdk.Record{Value: []byte(`3`)})
			p := status(func(p sdk.TransformPartition) bool { return p.PluginFailures >= 2 })
			if p.Committed != 2 || p.Lag != 2 || !strings.Contains(p.LastError, mode.says) || !strings.Contains(p.LastError, `"envelope"`) {
				t.Fatalf("status of the failing transform: %+v, want the input kept at 2 and the failure saying %q", p, mode.says)
			}
			t.Logf("the status says: %s", p.LastError)
			if got := values(t, c, "wrapped"); fmt.Sprint(got) != `[{"node":"edge-1","v":1} {"node":"edge-1","v":2}]` {
				t.Fatalf("output while failing: %q", got)
			}

			// The same transform with a plugin told to fail on nothing.
			if err := c.RemoveTransform(ctx, "wrap"); err != nil {
				t.Fatal(err)
			}
			cfg.Params = map[string]string{"node": "edge-2"}
			if err := c.AddTransform(ctx, "wrap", cfg); err != nil {
				t.Fatal(err)
			}
			status(func(p sdk.TransformPartition) bool { return p.Committed == 4 && p.Lag == 0 && p.LastError == "" })
			got := values(t, c, "wrapped")
			if len(got) != 6 || got[5] != `{"node":"edge-2","v":3}` {
				t.Fatalf("output after the plugin answers: %q", got)
			}
		})
	}
}

// values reads a topic's values from its start.
func values(t *testing.T, c *sdk.Client, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range readAll(testContext(t), t, c, topic) {
		out = append(out, string(r.Value))
	}
	return out
}
