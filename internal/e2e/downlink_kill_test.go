package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDownlinkSurvivesTwoKills: 20,000 keyed records written to Kafka
// (kfake; by kcat when it is installed, by a kgo producer otherwise) reach
// a durability "always" topic of the ledge binary through a downlink
// while the node is SIGKILLed twice: every record is there exactly once,
// with its key, and each key's records in the order they were written.
//
// covers: G83
func TestDownlinkSurvivesTwoKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	const (
		kafkaTopic = "cloud.commands"
		devices    = 50
		total      = 20000
	)
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, kafkaTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	seeds := strings.Join(kafka.ListenAddrs(), ",")
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Log("kcat is not installed: the records are written to Kafka by a kgo producer")
	}
	seq := make([]int, devices) // next per-key sequence written
	lines := make([]string, 0, total)
	for i := range total {
		d := i % devices
		lines = append(lines, fmt.Sprintf("device-%d:%d", d, seq[d]))
		seq[d]++
	}

	bin := buildLedge(t)
	begun := time.Now()
	node := newServedLedge(t, bin, filepath.Join(t.TempDir(), "ledge-data"))
	node.start()
	defer node.checkNoPanic()
	ctx := context.Background()
	c := node.dial(ctx)
	if _, err := c.CreateTopic(ctx, "commands", sdk.TopicConfig{Partitions: 2, Durability: sdk.DurabilityAlways}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if out, err := node.client("downlink", "add", "commands", "--kafka", seeds, "--from", kafkaTopic).CombinedOutput(); err != nil {
		t.Fatalf("ledge downlink add: %v\n%s", err, out)
	}

	// The cloud writes all along, in chunks, while the node is killed and
	// restarted twice.
	written := make(chan error, 1)
	go func() {
		for chunk := range slices.Chunk(lines, 250) {
			if err := writeKafka(seeds, kafkaTopic, chunk); err != nil {
				written <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		written <- nil
	}()
	waitLocal := func(n uint64) uint64 {
		t.Helper()
		deadline := time.Now().Add(safety)
		for {
			got := localRecords(ctx, t, node)
			if got >= n {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("the local topic holds %d records, want at least %d\n%s", got, n, node.logs.Tail(20))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	for _, at := range []uint64{4321, 12345} {
		got := waitLocal(at)
		node.stop(syscall.SIGKILL)
		t.Logf("%v: killed with %d records appended", time.Since(begun).Round(time.Millisecond), got)
		node.start()
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	waitLocal(total)
	t.Logf("%v: all %d records appended", time.Since(begun).Round(time.Millisecond), total)

	out, err := node.client("downlink", "status", "commands").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "running") {
		t.Fatalf("ledge downlink status: %v\n%s", err, out)
	}
	t.Logf("ledge downlink status commands:\n%s", out)

	c = node.dial(ctx)
	defer c.Close()
	recs := readAll(ctx, t, c, "commands")
	if len(recs) != total {
		t.Fatalf("the local topic holds %d records, want %d", len(recs), total)
	}
	next := make(map[string]int, devices)
	for _, r := range recs {
		key := string(r.Key)
		i, err := strconv.Atoi(string(r.Value))
		if err != nil || !strings.HasPrefix(key, "device-") {
			t.Fatalf("record %d of partition %d: key %q, value %q", r.Offset, r.Partition, r.Key, r.Value)
		}
		if i != next[key] {
			t.Fatalf("key %s: record %d follows record %d (partition %d offset %d): a duplicate, a gap or out of order",
				key, i, next[key]-1, r.Partition, r.Offset)
		}
		next[key]++
	}
	for d := range devices {
		if k := fmt.Sprintf("device-%d", d); next[k] != seq[d] {
			t.Fatalf("key %s: %d records, want %d", k, next[k], seq[d])
		}
	}
}

// localRecords is how many records the node's "commands" topic holds.
func localRecords(ctx context.Context, t *testing.T, node *servedLedge) uint64 {
	t.Helper()
	c := node.dial(ctx)
	defer c.Close()
	desc, err := c.DescribeTopic(ctx, "commands")
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, p := range desc.Partitions {
		n += p.HighWatermark - p.StartOffset - p.Skipped
	}
	return n
}

// writeKafka writes "key:value" lines to topic, each a record of that key
// and value, with kcat when it is installed and with a kgo producer
// otherwise. Both partition by the key, so a key's records stay in one
// partition, in order.
func writeKafka(seeds, topic string, lines []string) error {
	if bin, err := exec.LookPath("kcat"); err == nil {
		cmd := exec.Command(bin, "-P", "-b", seeds, "-t", topic, "-K", ":", "-z", "none", "-X", "enable.idempotence=true")
		cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kcat -P: %v\n%s", err, out)
		}
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...), kgo.DefaultProduceTopic(topic), kgo.DisableClientMetrics())
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		k, v, _ := strings.Cut(l, ":")
		recs[i] = &kgo.Record{Key: []byte(k), Value: []byte(v)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
