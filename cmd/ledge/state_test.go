package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// TestStateGetThroughCLI: a group member commits state with its offset;
// `ledge state get` shows it, all keys or one, as text and as JSON.
func TestStateGetThroughCLI(t *testing.T) {
	dir := t.TempDir()
	n := serve(t, dir)
	n.mustRun(t, "", "topic", "create", "events", "--partitions", "1")
	n.mustRun(t, "a\nb\na\n", "produce", "events", "--partition", "0")
	if out := n.mustRun(t, "", "state", "get", "counter", "events", "0"); !strings.Contains(out, "no state") {
		t.Fatalf("before any commit: %q", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	c, err := sdk.Dial(ctx, n.addr, sdk.WithDataDir(filepath.Join(dir, "ledge-data")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var g *sdk.GroupConsumer
	loaded := 0
	g, err = c.NewGroupConsumer(ctx, "counter", []string{"events"}, sdk.WithGroupMaxWait(50*time.Millisecond),
		sdk.OnAssigned(func(ctx context.Context, tps []sdk.TopicPartition) {
			for _, tp := range tps {
				if s, err := g.LoadState(ctx, tp.Topic, tp.Partition); err == nil && !s.HasCommitted && s.Next == 0 {
					loaded++
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*sdk.Record
	for len(recs) < 3 {
		got, err := g.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, got...)
	}
	if loaded != 1 {
		t.Fatalf("state loaded %d times on assignment, want once", loaded)
	}
	if err := g.CommitState(ctx, recs[2], []sdk.StateChange{
		sdk.PutState([]byte("a"), []byte("2")), sdk.PutState([]byte("b"), []byte("1")), sdk.PutState([]byte("bin"), []byte{0, 1}),
	}); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}

	out := n.mustRun(t, "", "state", "get", "counter", "events", "0")
	for _, want := range []string{"state at offset 3 (history 1), 3 keys", "a    2", "b    1", `bin  "\x00\x01"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("state get: %q lacks %q", out, want)
		}
	}
	var s stateJSON
	if err := json.Unmarshal([]byte(n.mustRun(t, "", "state", "get", "counter", "events", "0", "b", "--json")), &s); err != nil {
		t.Fatal(err)
	}
	if s.Committed == nil || *s.Committed != 3 || s.History != 1 || len(s.Entries) != 1 || s.Entries[0] != (stateEntryJSON{"b", "1"}) {
		t.Fatalf("state get --json b: %+v", s)
	}
	if _, _, err := n.run(t, "", "state", "get", "counter", "events", "x"); err == nil {
		t.Fatal("a partition that is not a number was accepted")
	}
}
