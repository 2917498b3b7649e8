package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
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

// TestUplinkStatusShowsLagAndWhatBites: `ledge uplink status` shows each
// partition's lag in records and age, and says in words when forwarding
// fails, when retention held records back (block) and when records were
// dropped before they were forwarded (drop-oldest).
func TestUplinkStatusShowsLagAndWhatBites(t *testing.T) {
	u := sdk.Uplink{Topic: "orders", Config: sdk.UplinkConfig{Seeds: []string{"k:9092"}, To: "edge.orders", Partitioning: "same", Overflow: "block"},
		Partitions: []sdk.UplinkPartition{
			{Partition: 0, State: "backoff", Position: 10, HighWatermark: 1210, LagRecords: 1200, LagAge: 2 * time.Hour,
				Failures: 7, Failing: 2*time.Hour + 3*time.Second, Backoff: 30 * time.Second, LastError: "dial tcp: connection refused", HeldBack: 800},
			{Partition: 1, State: "forwarding", Position: 50, HighWatermark: 50, Forwarded: 50, Dropped: 12},
		}}
	var out bytes.Buffer
	if err := printUplinkStatus(&out, u); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"overflow block", "HELD BACK", "1200", "2h0m0s",
		"partition 0: backoff, failing for 2h0m3s, next attempt in 30s: dial tcp: connection refused",
		"partition 0: retention held back 800 records",
		"partition 1: 12 records deleted before forwarded",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status does not show %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "partition 1: forwarding") {
		t.Errorf("a healthy partition is reported:\n%s", got)
	}
}

// TestStatusShowsUplinks: `ledge status` lists each forwarded partition
// with its lag, and nothing about uplinks when there are none.
func TestStatusShowsUplinks(t *testing.T) {
	var none bytes.Buffer
	if err := printStatusUplinks(&none, nil); err != nil || none.Len() != 0 {
		t.Fatalf("no uplinks printed %q (%v)", none.String(), err)
	}
	var out bytes.Buffer
	err := printStatusUplinks(&out, []ops.UplinkTopicStatus{{Topic: "orders", To: "edge.orders", Overflow: "drop-oldest",
		Partitions: []ops.UplinkPartitionStatus{{Partition: 0, State: "backoff", LagRecords: 1200, LagAgeSeconds: 7200,
			Dropped: 12, FailingSeconds: 7260}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"UPLINK", "orders/0", "edge.orders", "drop-oldest", "backoff", "1200", "2h"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ledge status does not show %q:\n%s", want, out.String())
		}
	}
}
