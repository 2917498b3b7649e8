package e2e

import (
	"slices"
	"testing"

	"github.com/ledgemq/ledge/sdk"
)

// TestE2EClientCommittedWhileAttached: Client.Committed reads a named
// consumer's committed offsets while a process is attached under the
// name, and a consumer attached later resumes at them (its first position
// comes from the node, as an explicit offset).
func TestE2EClientCommittedWhileAttached(t *testing.T) {
	ctx, dial := servedNode(t)
	c := dial()
	if _, err := c.CreateTopic(ctx, "t", sdk.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c", "d"} {
		if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	cons, err := c.NewConsumer(ctx, "t", sdk.WithConsumerName("c"), sdk.WithMaxMessages(2))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := cons.Poll(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("poll: %d records, %v", len(recs), err)
	}
	if err := cons.Commit(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	got, err := c.Committed(ctx, "t", "c")
	if err != nil {
		t.Fatalf("Client.Committed while attached: %v", err)
	}
	if len(got) != 1 || got[0].Err != nil || !got[0].Committed || got[0].Offset != 2 {
		t.Fatalf("Client.Committed while attached: %+v, want offset 2", got)
	}
	own, err := cons.Committed(ctx)
	if err != nil || len(own) != 1 || own[0].Offset != 2 {
		t.Fatalf("Consumer.Committed: %+v, %v", own, err)
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}

	again, err := c.NewConsumer(ctx, "t", sdk.WithConsumerName("c"))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	var values []string
	for len(values) < 2 {
		recs, err := again.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			values = append(values, string(r.Value))
		}
	}
	if !slices.Equal(values, []string{"c", "d"}) {
		t.Fatalf("resumed with %v, want [c d]", values)
	}
}
