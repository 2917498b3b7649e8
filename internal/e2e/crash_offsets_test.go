package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
)

// TestKilledNodeSkipsNoAlwaysOffset SIGKILLs `ledge serve` three times,
// five records acknowledged on a durability "always" topic before each
// kill: the sixteenth record is at offset 15, and the partition's history
// epoch never changed (nothing a reader could see was lost). A "none"
// topic beside it may skip offsets at each kill (what was reserved and not
// used, about a second of appends), but a consumer that committed
// everything before the kill has no lag after it: `ledge status` does not
// count the skipped offsets as records.
func TestKilledNodeSkipsNoAlwaysOffset(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	node := newServedLedge(t, buildLedge(t), filepath.Join(t.TempDir(), "ledge-data"))
	node.start()
	defer node.checkNoPanic()
	ctx := context.Background()
	c := node.dial(ctx)
	for _, tc := range []struct {
		name string
		d    sdk.Durability
	}{{"always", sdk.DurabilityAlways}, {"none", sdk.DurabilityNone}} {
		if _, err := c.CreateTopic(ctx, tc.name, sdk.TopicConfig{Partitions: 1, Durability: tc.d}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	for round := range 4 {
		c := node.dial(ctx)
		always, err := c.NewProducer(ctx, "always")
		if err != nil {
			t.Fatal(err)
		}
		n := 5
		if round == 3 {
			n = 1
		}
		for i := range n {
			r := &sdk.Record{Value: fmt.Appendf(nil, "r%d.%d", round, i)}
			if err := always.ProduceSync(ctx, r); err != nil {
				t.Fatalf("round %d: produce: %v", round, err)
			}
			if want := uint64(5*round + i); r.Offset != want {
				t.Fatalf("record %d of the always topic has offset %d, want %d", want+1, r.Offset, want)
			}
		}
		desc, err := c.DescribeTopic(ctx, "always")
		if err != nil {
			t.Fatal(err)
		}
		if p := desc.Partitions[0]; p.History != 1 {
			t.Fatalf("round %d: the always topic's history epoch is %d, want 1: %+v", round, p.History, p)
		}
		if round == 3 {
			c.Close()
			break
		}
		commitEverything(ctx, t, c, round)
		c.Close()
		node.stop(syscall.SIGKILL)
		node.start()
		pos, hw, lag := consumerLag(t, node, "none")
		t.Logf("after kill %d: the none topic resumes numbering at %d, %d offsets above the consumer's position %d; its lag %d", round+1, hw, hw-pos, pos, lag)
		if lag != 0 {
			t.Fatalf("after kill %d: the consumer committed everything, yet its lag is %d (high watermark %d, position %d)", round+1, lag, hw, pos)
		}
		if hw-pos >= 1<<16 {
			t.Fatalf("after kill %d: the none topic skipped %d offsets, more than about a second of appends", round+1, hw-pos)
		}
	}
}

// commitEverything produces 200 records to the "none" topic and has the
// consumer "reader" read and commit everything it holds.
func commitEverything(ctx context.Context, t *testing.T, c *sdk.Client, round int) {
	t.Helper()
	p, err := c.NewProducer(ctx, "none")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := p.ProduceSync(ctx, &sdk.Record{Value: fmt.Appendf(nil, "n%d.%d", round, i)}); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := c.NewConsumer(ctx, "none", sdk.WithConsumerName("reader"), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 200; {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.Commit(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		got += len(recs)
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// consumerLag reads the consumer "reader" of topic from the node's status
// document: its position, the partition's high watermark and its lag.
func consumerLag(t *testing.T, s *servedLedge, topic string) (pos, hw, lag uint64) {
	t.Helper()
	var st ops.Status
	if err := json.Unmarshal([]byte(get(t, s, "/api/status")), &st); err != nil {
		t.Fatal(err)
	}
	for _, tp := range st.Topics {
		if tp.Name == topic {
			hw = tp.Partitions[0].HighWatermark
		}
	}
	for _, cs := range st.Consumers {
		if cs.Name == "reader" && cs.Topic == topic {
			return cs.Partitions[0].Position, hw, cs.Lag
		}
	}
	t.Fatalf("no consumer reader of %s in the status: %+v", topic, st.Consumers)
	return 0, 0, 0
}
