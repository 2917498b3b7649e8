package main

import (
	"slices"
	"testing"
)

// TestUplinkAddNeedsKafkaAndTarget: `ledge uplink add` refuses to run
// without --kafka and --to, before dialing the node.
func TestUplinkAddNeedsKafkaAndTarget(t *testing.T) {
	cmd := newUplinkCommand()
	cmd.SetArgs([]string{"add", "events", "--kafka", "k:9092"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil {
		t.Fatal("add without --to ran")
	}
	if got := splitSeeds([]string{"a:1,b:2", " c:3 "}); !slices.Equal(got, []string{"a:1", "b:2", "c:3"}) {
		t.Fatalf("seeds %v", got)
	}
}
