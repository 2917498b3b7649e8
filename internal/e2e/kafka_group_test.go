package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceKafka writes count records value-<first>.. round robin over
// partitions with franz-go (a client with the manual partitioner).
func produceKafka(t *testing.T, cl *kgo.Client, topic string, partitions, first, count int) {
	t.Helper()
	ctx := testContext(t)
	for i := first; i < first+count; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: fmt.Appendf(nil, "value-%03d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// groupMember is a franz-go group consumer that commits what it polled
// itself, and the values it has seen.
type groupMember struct {
	cl   *kgo.Client
	seen []string
}

func (m *groupMember) poll(t *testing.T, ctx context.Context) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("gave up after reading %d records", len(m.seen))
	}
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	fs := m.cl.PollFetches(pctx)
	fs.EachError(func(topic string, p int32, err error) {
		if pctx.Err() == nil {
			t.Logf("fetch %s/%d: %v", topic, p, err)
		}
	})
	fs.EachRecord(func(r *kgo.Record) { m.seen = append(m.seen, string(r.Value)) })
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Logf("commit: %v", err)
	}
	// Partitions move only between polls, once what was read is
	// committed: no record is read twice.
	m.cl.AllowRebalance()
}

// TestKafkaGroupConsumeCommitRebalance: a franz-go group consumer reads
// and commits; a second member joins and the node moves half the
// partitions to it; together they read everything exactly once; Ledge's
// SDK sees the group and its commits. With the classic protocol
// (JoinGroup, SyncGroup, Heartbeat) and with KIP-848's
// ConsumerGroupHeartbeat.
func TestKafkaGroupConsumeCommitRebalance(t *testing.T) {
	t.Run("classic", func(t *testing.T) { testKafkaGroup(t) })
	t.Run("kip848", func(t *testing.T) {
		testKafkaGroup(t, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	})
}

func testKafkaGroup(t *testing.T, opts ...kgo.Opt) {
	n := startKafkaNode(t)
	ctx := testContext(t)
	secret := adminToken(t, n)
	prod := kafkaClient(t, n, secret, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkaCreateTopic(t, prod, "events", 4)
	produceKafka(t, prod, "events", 4, 0, 40)

	member := func() *groupMember {
		return &groupMember{cl: kafkaClient(t, n, secret, append([]kgo.Opt{
			kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("events"), kgo.ClientID("reader"),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.HeartbeatInterval(100 * time.Millisecond),
		}, opts...)...)}
	}
	a := member()
	for len(a.seen) < 40 {
		a.poll(t, ctx)
	}

	c := dial(t, n)
	desc, err := c.DescribeGroup(ctx, "readers")
	if err != nil {
		t.Fatal(err)
	}
	var committed uint64
	for _, o := range desc.Offsets {
		committed += o.Offset
	}
	if len(desc.Members) != 1 || committed != 40 {
		t.Fatalf("after one member read 40 records, the group has %d members and %d committed: %+v", len(desc.Members), committed, desc)
	}
	// The member is described by its Kafka client id and the host it
	// connects from.
	if m := desc.Members[0]; m.ClientID != "reader" || m.Host != "127.0.0.1" {
		t.Fatalf("the Kafka member is described with client id %q and host %q, want reader from 127.0.0.1", m.ClientID, m.Host)
	}

	// A second member joins; records keep coming, 8 at a time, until
	// it has read some: the node moved partitions to it.
	b := member()
	produced := 40
	for len(b.seen) == 0 {
		produceKafka(t, prod, "events", 4, produced, 8)
		produced += 8
		for len(a.seen)+len(b.seen) < produced {
			a.poll(t, ctx)
			b.poll(t, ctx)
		}
	}
	all := append(slices.Clone(a.seen), b.seen...)
	slices.Sort(all)
	if len(all) != produced || len(slices.Compact(slices.Clone(all))) != produced {
		t.Fatalf("the two members read %d records, %d distinct; want the %d once each", len(all), len(slices.Compact(all)), produced)
	}
	desc, err = c.DescribeGroup(ctx, "readers")
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Members) != 2 {
		t.Fatalf("the group has %d members, want 2: %+v", len(desc.Members), desc.Members)
	}
	for _, m := range desc.Members {
		if len(m.Assigned) != 2 {
			t.Errorf("member %s holds %v, want 2 of the 4 partitions", m.ID, m.Assigned)
		}
	}
}
