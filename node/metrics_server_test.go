package node

import (
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/ops/opstest"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ledgemq/ledge/transport/wire"
)

// TestMetricsAfterProduceConsumeCommitPurge drives a node on the storage
// engine through produce, consume, commit and purge, and checks what
// /metrics and /api/status say after each step.
func TestMetricsAfterProduceConsumeCommitPurge(t *testing.T) {
	ops := newOpsServer(t, ops.HTTPConfig{})
	m := ops.Metrics()
	var wired bool
	tn := startNode(t, nil, func(cfg *Config) {
		cfg.FS = vfs.Default
		wired = instrument(cfg, m)
	})
	ops.Attach(tn.Node)
	c := tn.mustDial(t, tn.admin)
	info := c.createTopic("orders", wire.TopicConfig{Durability: wire.DurabilityAlways})

	gauge := func(name string, labels ...string) float64 {
		t.Helper()
		return opstest.MustMetric(t, m.Registry(), name, labels...)
	}
	part := []string{"topic", "orders", "partition", "0"}
	billing := append(part[:4:4], "consumer", "billing", "kind", "consumer")
	expect := func(step string, want map[string]float64, labels []string) {
		t.Helper()
		for name, v := range want {
			if got := gauge(name, labels...); got != v {
				t.Errorf("after %s: %s = %v; want %v", step, name, got, v)
			}
		}
	}

	// Produce 5 then 3 records.
	b1, b2 := batch(t, 0, 0, 0, "a", "b", "c", "d", "e"), batch(t, 0, 0, 0, "f", "g", "h")
	sent := len(b1) + len(b2)
	for _, b := range [][]byte{b1, b2} {
		if _, err := c.produce(c.main, "orders", 0, b); err != nil {
			t.Fatal(err)
		}
	}
	expect("produce", map[string]float64{
		"ledge_partition_high_watermark": 8, "ledge_partition_log_start_offset": 0,
		"ledge_partition_history_epoch": 1, "ledge_partition_records": 8, "ledge_partition_failed": 0,
	}, part)
	if size := gauge("ledge_partition_size_bytes", part...); size < float64(sent) {
		t.Errorf("partition size %v bytes; %d bytes were appended", size, sent)
	}
	if got := gauge("ledge_fsync_duration_seconds", "target", "segment"); got < 1 {
		t.Errorf("no segment fsync timed under durability always (%v)", got)
	}
	expect("produce", map[string]float64{"ledge_topics": 1, "ledge_partitions": 1, "ledge_connections_open": 1}, nil)

	// Consume everything as "billing", commit at offset 5: lag 3.
	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "billing"}, &att)
	me := named("billing", att.Session)
	got := c.pollOne(c.main, me, "orders", wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}, 0)
	if got.Status != wire.StatusOK || got.Next != 8 {
		t.Fatalf("poll: %s %q next %d", got.Status, got.Message, got.Next)
	}
	var commit wire.CommitReply
	c.mustCall(&wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{{Topic: "orders", Offset: 5, Token: got.Token}}}, &commit)
	if commit.Partitions[0].Status != wire.StatusOK {
		t.Fatalf("commit: %+v", commit.Partitions[0])
	}
	expect("commit", map[string]float64{"ledge_consumer_committed_offset": 5, "ledge_consumer_lag_records": 3}, billing)
	st := ops.status(t)
	if len(st.Consumers) != 1 || st.Consumers[0].Name != "billing" || st.Consumers[0].Lag != 3 || st.Consumers[0].Partitions[0].Committed != 5 {
		t.Errorf("status consumers after commit: %+v", st.Consumers)
	}

	// Purge: the start rises to the high watermark, the epoch bumps, and
	// the bookmark of the old history counts at the new start: no lag.
	var purge wire.PurgeReply
	c.mustCall(&wire.PurgeRequest{Topic: "orders", TopicID: info.ID}, &purge)
	expect("purge", map[string]float64{
		"ledge_partition_high_watermark": 8, "ledge_partition_log_start_offset": 8,
		"ledge_partition_history_epoch": 2, "ledge_partition_records": 0,
	}, part)
	expect("purge", map[string]float64{"ledge_consumer_committed_offset": 8, "ledge_consumer_lag_records": 0}, billing)

	// A commit derived from the poll before the purge is fenced.
	c.mustCall(&wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{{Topic: "orders", Offset: 8, Token: got.Token}}}, &commit)
	if s := commit.Partitions[0].Status; s != wire.StatusStaleHistory {
		t.Fatalf("commit across the purge: %s", s)
	}

	// Two more records: lag 2.
	if _, err := c.produce(c.main, "orders", 0, batch(t, 0, 0, 0, "i", "j")); err != nil {
		t.Fatal(err)
	}
	expect("produce after purge", map[string]float64{"ledge_partition_high_watermark": 10, "ledge_partition_records": 2}, part)
	expect("produce after purge", map[string]float64{"ledge_consumer_lag_records": 2}, billing)
	appended := sent + len(batch(t, 0, 0, 0, "i", "j"))
	expect("the sequence", map[string]float64{
		"ledge_partition_appends_total": 3, "ledge_partition_appended_bytes_total": float64(appended),
		"ledge_partition_fsync_failures_total": 0, "ledge_partition_no_space_refusals_total": 0,
	}, part)

	st = ops.status(t)
	if len(st.Topics) != 1 {
		t.Fatalf("status topics: %+v", st.Topics)
	}
	tp := st.Topics[0].Partitions[0]
	if st.Topics[0].Name != "orders" || tp.LogStart != 8 || tp.HighWatermark != 10 || tp.HistoryEpoch != 2 || tp.Records != 2 ||
		tp.SizeBytes <= 0 || tp.Appends != 3 || tp.AppendedBytes != uint64(appended) {
		t.Errorf("status partition: %+v", tp)
	}
	if cs := st.Consumers[0]; cs.Lag != 2 || cs.Partitions[0].Position != 8 || cs.Partitions[0].CommittedHistory != 1 {
		t.Errorf("status consumer: %+v", cs)
	}
	if !st.Health.Ready || st.Transport.ConnectionsOpen != 1 || st.Node.Listen != tn.Addr() {
		t.Errorf("status health %+v transport %+v", st.Health, st.Transport)
	}

	t.Run("request path counters", func(t *testing.T) {
		if !wired {
			t.Skip("node.Config has no Metrics field: the request path reports no counters yet")
		}
		if d := gauge("ledge_partition_delivered_bytes_total", part...); d < float64(sent) {
			t.Errorf("delivered %v bytes; the poll returned %d", d, sent)
		}
		for _, tc := range []struct {
			labels []string
			want   float64
		}{
			{[]string{"kind", "produce", "status", "ok"}, 3},
			{[]string{"kind", "poll", "status", "ok"}, 1},
			{[]string{"kind", "commit", "status", "ok"}, 2}, // the per-partition status is in the reply
			{[]string{"kind", "purge", "status", "ok"}, 1},
		} {
			if got := gauge("ledge_requests_total", tc.labels...); got != tc.want {
				t.Errorf("ledge_requests_total%v = %v; want %v", tc.labels, got, tc.want)
			}
		}
		if got := gauge("ledge_request_duration_seconds", "kind", "produce"); got != 3 {
			t.Errorf("produce latency observations = %v; want 3", got)
		}
		if got := gauge("ledge_fence_rejections_total", "kind", "commit", "code", "stale_history"); got != 1 {
			t.Errorf("stale-history rejections of commits = %v; want 1", got)
		}
	})
}
