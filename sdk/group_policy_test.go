package sdk_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// A commit policy set on a group governs its commits: a GroupConsumer
// created without WithDelivery follows it (CommitByPolicy, and says
// which policy), so the group's committed offset is the policy's; with
// WithDelivery(AtLeastOnce) the consumer commits what it polled.
func TestGroupConsumerFollowsTheGroupsPolicy(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain to build the checkpoint example: %v", err)
	}
	wasm := filepath.Join(t.TempDir(), "checkpoint.wasm")
	build := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", wasm, "./plugin/examples/checkpoint")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	module, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx, c := dialTestNode(t)
	policy := "checkpoint-follow"
	if _, err := c.AddPlugin(ctx, policy, sdk.PluginCommitPolicy, module); err != nil {
		t.Fatal(err)
	}
	topic := createTopic(ctx, t, c, "policy-follow")
	p, err := c.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	mark := []sdk.Header{{Key: "checkpoint", Value: []byte("yes")}}
	if err := p.ProduceSync(ctx,
		&sdk.Record{Value: []byte("a")}, &sdk.Record{Value: []byte("b"), Headers: mark},
		&sdk.Record{Value: []byte("c"), Headers: mark}, &sdk.Record{Value: []byte("d")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name      string
		opts      []sdk.GroupOption
		delivery  sdk.Delivery
		policy    string
		committed uint64
	}{
		{"default", nil, sdk.CommitByPolicy, policy, 3},
		{"opt-out", []sdk.GroupOption{sdk.WithDelivery(sdk.AtLeastOnce)}, sdk.AtLeastOnce, "", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := topic + "-" + tc.name
			if err := c.SetGroupCommitPolicy(ctx, group, policy, nil); err != nil {
				t.Fatal(err)
			}
			g, err := c.NewGroupConsumer(ctx, group, []string{topic}, append(tc.opts, sdk.WithGroupMaxWait(100*time.Millisecond))...)
			if err != nil {
				t.Fatal(err)
			}
			if g.Delivery() != tc.delivery || g.GroupPolicy() != tc.policy {
				t.Errorf("Delivery %v, GroupPolicy %q; want %v, %q", g.Delivery(), g.GroupPolicy(), tc.delivery, tc.policy)
			}
			for got := 0; got < 4; {
				recs, err := g.Poll(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got += len(recs)
			}
			if err := g.Close(context.WithoutCancel(ctx)); err != nil {
				t.Fatal(err)
			}
			d, err := c.DescribeGroup(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Offsets) != 1 || !d.Offsets[0].Committed || d.Offsets[0].Offset != tc.committed {
				t.Errorf("committed %+v, want offset %d", d.Offsets, tc.committed)
			}
		})
	}
}
