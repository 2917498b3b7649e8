package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/sdk"
)

// TestDownlinkAddNeedsKafkaAndSource: `ledge downlink add` refuses to run
// without --kafka and --from, before dialing the node.
func TestDownlinkAddNeedsKafkaAndSource(t *testing.T) {
	for _, args := range [][]string{
		{"add", "commands", "--kafka", "k:9092"},
		{"add", "commands", "--from", "cloud.commands"},
	} {
		cmd := newDownlinkCommand()
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err == nil {
			t.Fatalf("%v ran", args)
		}
	}
}

// TestDownlinkStatusShowsLagAndWhatBites: `ledge downlink status` shows
// each Kafka partition's local partition, position, lag and records, and
// says in words that the node is not connected, that attempts fail, and
// that Kafka deleted records before they were read.
func TestDownlinkStatusShowsLagAndWhatBites(t *testing.T) {
	d := sdk.Downlink{Topic: "commands", Config: sdk.DownlinkConfig{Seeds: []string{"k:9092"}, From: "cloud.commands"},
		State: "backoff", Failures: 3, Failing: 90 * time.Second, Backoff: 2 * time.Second, LastError: "dial tcp: connection refused",
		Partitions: []sdk.DownlinkPartition{
			{Partition: 0, Local: 0, Position: 1200, HighWatermark: 5200, Lag: 4000, Records: 1200, Producer: 7, Epoch: 2},
			{Partition: 1, Local: 1, Position: -1, HighWatermark: -1, Deleted: 12},
		}}
	var out bytes.Buffer
	if err := printDownlinkStatus(&out, d); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"downlink commands <- cloud.commands (k:9092): backoff, connected no",
		"4000", "5200", "7/2",
		"3 failures, failing for 1m30s, next attempt in 2s; last: dial tcp: connection refused",
		"Kafka partition 1: 12 records deleted by Kafka (retention) before they were read",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status does not show %q:\n%s", want, got)
		}
	}
}

// TestStatusShowsDownlinks: `ledge status` lists each Kafka partition a
// downlink reads with its lag, and nothing about downlinks when there are
// none.
func TestStatusShowsDownlinks(t *testing.T) {
	var none bytes.Buffer
	if err := printStatusDownlinks(&none, nil); err != nil || none.Len() != 0 {
		t.Fatalf("no downlinks printed %q (%v)", none.String(), err)
	}
	var out bytes.Buffer
	err := printStatusDownlinks(&out, []ops.DownlinkStatus{{Topic: "commands", From: "cloud.commands", State: "running",
		Partitions: []ops.DownlinkPartitionStatus{{Partition: 3, Local: 1, Lag: 1200, Records: 50, Deleted: 7}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DOWNLINK", "commands/1", "cloud.commands/3", "running", "no", "1200", "50", "7"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ledge status does not show %q:\n%s", want, out.String())
		}
	}
}
