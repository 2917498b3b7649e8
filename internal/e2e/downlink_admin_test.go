package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestDownlinkAdmin: a downlink added through the SDK appears in the list
// and in its status with its Kafka partitions, their lag and records;
// commands written to Kafka reach the local topic with their keys and the
// headers naming their Kafka partition and offset, and a device polling
// its key gets its own commands, in order; a token without the
// admin scope may not manage downlinks; after remove, the downlink is gone
// and what it appended stays.
func TestDownlinkAdmin(t *testing.T) {
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "cloud.config"))
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	n := startNode(t, nil)
	ctx := testContext(t)
	c := dial(t, n)
	createTopic(t, c, "config", sdk.TopicConfig{Partitions: 2, Durability: sdk.DurabilityAlways})

	cfg := sdk.DownlinkConfig{Seeds: kafka.ListenAddrs(), From: "cloud.config"}
	if err := c.AddDownlink(ctx, "nope", cfg); err == nil {
		t.Fatal("a downlink into a topic that does not exist was added")
	}
	if err := c.AddDownlink(ctx, "config", sdk.DownlinkConfig{From: "cloud.config"}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("a downlink without seeds: %v, want ErrInvalidArgument", err)
	}
	if err := c.AddDownlink(ctx, "config", cfg); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := range 10 {
		lines = append(lines, fmt.Sprintf("device-%d:set rate=%d", i%3, i))
	}
	if err := writeKafka(strings.Join(kafka.ListenAddrs(), ","), "cloud.config", lines); err != nil {
		t.Fatal(err)
	}

	var d sdk.Downlink
	for deadline := time.Now().Add(safety); d.Records < 10; time.Sleep(time.Millisecond) {
		if d, err = c.DownlinkStatus(ctx, "config"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the downlink appended %d records, want 10: %+v", d.Records, d)
		}
	}
	if d.State != "running" || !d.Connected || d.Config.From != "cloud.config" || len(d.Partitions) != 2 {
		t.Fatalf("status %+v, want running and connected, from cloud.config, over 2 Kafka partitions", d)
	}
	for _, p := range d.Partitions {
		// A partition the cloud has not written yet has no position: it
		// starts at Kafka's oldest record.
		if p.Local != p.Partition || p.Lag != 0 || p.Position != int64(p.Records) && !(p.Position == -1 && p.Records == 0) {
			t.Fatalf("partition %+v: want local partition %d, no lag, position at the records appended", p, p.Partition)
		}
	}
	list, err := c.ListDownlinks(ctx)
	if err != nil || len(list) != 1 || list[0].Topic != "config" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	recs := readAll(ctx, t, c, "config")
	if len(recs) != 10 {
		t.Fatalf("the local topic holds %d records, want 10", len(recs))
	}
	for _, r := range recs {
		var kp, ko bool
		for _, h := range r.Headers {
			kp = kp || h.Key == "ledge-kafka-partition" && string(h.Value) == fmt.Sprint(r.Partition)
			ko = ko || h.Key == "ledge-kafka-offset"
		}
		if !strings.HasPrefix(string(r.Key), "device-") || !strings.HasPrefix(string(r.Value), "set rate=") || !kp || !ko {
			t.Fatalf("record %q key %q headers %v: want its key and the Kafka partition and offset headers", r.Value, r.Key, r.Headers)
		}
	}

	// A device polling its own key gets its commands only.
	cons, err := c.NewConsumer(ctx, "config", sdk.WithStart(sdk.AtFirst()), sdk.WithMaxWait(0), sdk.WithKey([]byte("device-1")))
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for empty := 0; empty < 3; {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			empty++
		}
		for _, r := range recs {
			mine = append(mine, string(r.Value))
		}
	}
	_ = cons.Close(ctx)
	if want := []string{"set rate=1", "set rate=4", "set rate=7"}; !slices.Equal(mine, want) {
		t.Fatalf("device-1 polled %q, want %q", mine, want)
	}

	_, secret, err := c.CreateToken(ctx, sdk.TokenSpec{Label: "device", Topic: "config", Scopes: sdk.ScopeConsume})
	if err != nil {
		t.Fatal(err)
	}
	dev := dial(t, n, sdk.WithToken(secret))
	if err := dev.RemoveDownlink(ctx, "config"); !errors.Is(err, sdk.ErrForbidden) {
		t.Fatalf("a consume-only token removed a downlink: %v", err)
	}

	if err := c.RemoveDownlink(ctx, "config"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DownlinkStatus(ctx, "config"); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("status after remove: %v, want ErrInvalidArgument (no downlink)", err)
	}
	if got := readAll(ctx, t, c, "config"); len(got) != 10 {
		t.Fatalf("after remove the topic holds %d records, want the 10 appended", len(got))
	}
}
