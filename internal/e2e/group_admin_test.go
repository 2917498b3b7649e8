package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
	"github.com/ledgemq/ledge/transport/wire"
)

// The SDK's group administration over QUIC: a policy naming no plugin is
// refused, deleting a group with a member is refused with a clear error,
// and once the member closed, DeleteGroup removes the group and its
// offsets, so that a member of a group created again under the name reads
// from the start.
func TestE2EGroupAdministrationThroughTheSDK(t *testing.T) {
	ctx, dial := servedNode(t)
	c := dial()
	if _, err := c.CreateTopic(ctx, "orders", sdk.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b"} {
		if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	if err := c.SetGroupCommitPolicy(ctx, "billing", "nope", nil); !errors.Is(err, wire.StatusUnknownPlugin) {
		t.Fatalf("a policy naming no plugin: %v", err)
	}
	if err := c.DeleteGroup(ctx, "billing"); !errors.Is(err, wire.StatusInvalidArgument) {
		t.Fatalf("deleting an unknown group: %v", err)
	}

	consume := func() (*sdk.GroupConsumer, []string) {
		g, err := c.NewGroupConsumer(ctx, "billing", []string{"orders"}, sdk.WithGroupMaxWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(got) < 2 {
			recs, err := g.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				got = append(got, string(r.Value))
			}
		}
		return g, got
	}
	g, got := consume()
	err = c.DeleteGroup(ctx, "billing")
	if !errors.Is(err, wire.StatusInvalidArgument) || sdk.IsRetryable(err) {
		t.Fatalf("deleting a group with a member: %v", err)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeGroup(ctx, "billing")
	if err != nil || len(d.Offsets) != 1 || !d.Offsets[0].Committed || d.Offsets[0].Offset != 2 {
		t.Fatalf("before the deletion: %+v %v", d, err)
	}
	if err := c.DeleteGroup(ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	if gs, err := c.ListGroups(ctx); err != nil || len(gs) != 0 {
		t.Fatalf("groups after the deletion: %+v %v", gs, err)
	}
	g, again := consume()
	defer g.Close(ctx)
	if len(again) != 2 || again[0] != got[0] {
		t.Fatalf("after the deletion the group read %q, first time %q", again, got)
	}
}
