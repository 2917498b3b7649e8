package e2e

import (
	"fmt"
	"testing"

	"github.com/ledgemq/ledge/sdk"
)

func TestProduceConsumeCommit(t *testing.T) {
	n := startNode(t, nil)
	c := dial(t, n)
	ctx := testContext(t)
	createTopic(t, c, "orders", sdk.TopicConfig{Partitions: 3, Durability: sdk.DurabilityAlways})

	p, err := c.NewProducer(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	const count = 300
	recs := make([]*sdk.Record, count)
	for i := range recs {
		recs[i] = &sdk.Record{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: []byte(fmt.Sprintf("v%d", i))}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	cons, err := c.NewConsumer(ctx, "orders", sdk.WithConsumerName("billing"), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < count {
		rs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			t.Fatalf("poll returned nothing after %d records", len(got))
		}
		for _, r := range rs {
			got[string(r.Value)] = true
		}
		if err := cons.Commit(ctx, rs...); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := cons.Committed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, co := range committed {
		total += co.Offset
	}
	if total != count {
		t.Fatalf("committed offsets sum to %d, want %d: %+v", total, count, committed)
	}
	_ = cons.Close(ctx)
}
