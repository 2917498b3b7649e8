package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The seed scenarios through Kafka clients: a purge while a consumer is
// mid-poll, a member fenced past its session whose late commit is
// refused, and a regain.

// kafkaCommit commits one offset of topic/0 as a classic member, with a
// raw OffsetCommit, and returns the partition's error (nil: accepted).
func kafkaCommit(t *testing.T, cl *kgo.Client, group, member string, generation int32, topic string, offset int64, leaderEpoch int32) error {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatalf("offset commit: %v", err)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// kafkaCommitted is the group's committed offset of topic/0 (-1: none).
func kafkaCommitted(t *testing.T, cl *kgo.Client, group, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// TestKafkaPurgeWhileConsumerPolls: a franz-go group member has read and
// committed everything and waits in a fetch; the partition is purged
// (DeleteRecords) and written again. The member reads exactly the new
// records, stamped with the new leader epoch (the history epoch); a
// commit carrying the old leader epoch is refused; the group resumes
// after the new records.
func TestKafkaPurgeWhileConsumerPolls(t *testing.T) {
	n := startKafkaNode(t)
	ctx := testContext(t)
	secret := adminToken(t, n)
	prod := kafkaClient(t, n, secret)
	kafkaCreateTopic(t, prod, "purged", 1)
	produceKafka(t, prod, "purged", 1, 0, 10)

	cons := kafkaClient(t, n, secret, kgo.ConsumerGroup("watchers"), kgo.ConsumeTopics("purged"),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(time.Second))
	var read []*kgo.Record
	for len(read) < 10 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		read = append(read, fs.Records()...)
	}
	if err := cons.CommitRecords(ctx, read...); err != nil {
		t.Fatal(err)
	}
	epoch := read[9].LeaderEpoch

	// The member polls again: its fetch waits on the node.
	type polled struct{ recs []*kgo.Record }
	got := make(chan polled, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		var recs []*kgo.Record
		for len(recs) < 5 && ctx.Err() == nil {
			recs = append(recs, cons.PollFetches(ctx).Records()...)
		}
		got <- polled{recs}
	})
	for n.ParkedPolls() == 0 { // its fetch waits on the node
		if ctx.Err() != nil {
			t.Fatal("the member's fetch never parked")
		}
		time.Sleep(time.Millisecond)
	}

	del := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "purged"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 0, -1
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics = append(del.Topics, dt)
	dresp, err := del.RequestWith(ctx, prod)
	if err != nil {
		t.Fatal(err)
	}
	if p := dresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 10 {
		t.Fatalf("DeleteRecords: error %v, low watermark %d; want the start at 10", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	produceKafka(t, prod, "purged", 1, 10, 5)

	after := (<-got).recs
	wg.Wait()
	if len(after) != 5 {
		t.Fatalf("after the purge the member read %d records, want the 5 new ones", len(after))
	}
	for i, r := range after {
		if r.Offset != int64(10+i) || r.LeaderEpoch != epoch+1 || string(r.Value) != "value-"+pad3(10+i) {
			t.Errorf("record %d: offset %d, leader epoch %d, value %q; want offset %d of leader epoch %d", i, r.Offset, r.LeaderEpoch, r.Value, 10+i, epoch+1)
		}
	}

	// Where the old leader epoch ended, and the partition's range now.
	olr := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "purged"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.LeaderEpoch, op.CurrentLeaderEpoch = 0, epoch, epoch+1
	ot.Partitions = append(ot.Partitions, op)
	olr.Topics = append(olr.Topics, ot)
	oresp, err := olr.RequestWith(ctx, prod)
	if err != nil {
		t.Fatal(err)
	}
	if p := oresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.EndOffset != 10 {
		t.Fatalf("OffsetForLeaderEpoch(%d): end offset %d, %v; want 10, where the purge started the next", epoch, p.EndOffset, kerr.ErrorForCode(p.ErrorCode))
	}
	for ts, want := range map[int64]int64{-2: 10, -1: 15} {
		lreq := kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "purged"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = 0, ts, -1
		lt.Partitions = append(lt.Partitions, lp)
		lreq.Topics = append(lreq.Topics, lt)
		lresp, err := lreq.RequestWith(ctx, prod)
		if err != nil {
			t.Fatal(err)
		}
		if p := lresp.Topics[0].Partitions[0]; p.Offset != want || p.LeaderEpoch != epoch+1 {
			t.Errorf("ListOffsets(%d): offset %d of leader epoch %d, want %d of %d", ts, p.Offset, p.LeaderEpoch, want, epoch+1)
		}
	}

	member, generation := cons.GroupMetadata()
	if err := kafkaCommit(t, prod, "watchers", member, generation, "purged", 12, epoch); err != kerr.FencedLeaderEpoch {
		t.Fatalf("a commit of the old leader epoch: %v, want FENCED_LEADER_EPOCH", err)
	}
	if err := cons.CommitRecords(ctx, after...); err != nil {
		t.Fatalf("the member's commit after the purge: %v", err)
	}
	if off := kafkaCommitted(t, prod, "watchers", "purged"); off != 15 {
		t.Fatalf("the group resumes at %d, want 15", off)
	}
}

func pad3(i int) string {
	return string([]byte{byte('0' + i/100), byte('0' + i/10%10), byte('0' + i%10)})
}

// kafkaMember is a classic group member driven request by request.
type kafkaMember struct {
	id         string
	generation int32
}

// kafkaJoin joins (or rejoins, with id) the group subscribed to topic,
// and syncs; it returns the member and the partitions of topic it holds.
func kafkaJoin(t *testing.T, cl *kgo.Client, group, id, topic string) (kafkaMember, []int32) {
	t.Helper()
	ctx := testContext(t)
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{topic}}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.MemberID, join.ProtocolType = group, id, "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10_000, 10_000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	jr, err := join.RequestWith(ctx, cl)
	if err != nil || jr.ErrorCode != 0 {
		t.Fatalf("join: %v %v", err, kerr.ErrorForCode(jr.ErrorCode))
	}
	m := kafkaMember{id: jr.MemberID, generation: jr.Generation}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = group, m.id, m.generation
	sr, err := sync.RequestWith(ctx, cl)
	if err != nil || sr.ErrorCode != 0 {
		t.Fatalf("sync: %v %v", err, kerr.ErrorForCode(sr.ErrorCode))
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(sr.MemberAssignment); err != nil {
		t.Fatal(err)
	}
	var held []int32
	for _, at := range a.Topics {
		held = append(held, at.Partitions...)
	}
	return m, held
}

func kafkaHeartbeat(t *testing.T, cl *kgo.Client, group string, m kafkaMember) error {
	t.Helper()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = group, m.id, m.generation
	resp, err := hb.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// TestKafkaLateCommitOfExpiredMemberRefused: a classic member falls
// silent past its session; another member takes its partition; the
// first one's late commit is refused and the committed offset stays the
// one the group made. When it comes back and regains the partition, a
// commit under its old generation is still refused: the partition's
// assignment epoch is newer.
func TestKafkaLateCommitOfExpiredMemberRefused(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	n := startNode(t, func(c *node.Config) { c.KafkaListen, c.Now = "127.0.0.1:0", clock })
	cl := kafkaClient(t, n, adminToken(t, n))
	kafkaCreateTopic(t, cl, "ledger", 1)
	produceKafka(t, cl, "ledger", 1, 0, 3)

	first, held := kafkaJoin(t, cl, "billing", "", "ledger")
	if len(held) != 1 {
		t.Fatalf("the only member holds %v, want partition 0", held)
	}
	if err := kafkaCommit(t, cl, "billing", first.id, first.generation, "ledger", 1, -1); err != nil {
		t.Fatalf("a commit of the holder: %v", err)
	}

	advance(11 * time.Second) // past the first member's 10s session
	second, held := kafkaJoin(t, cl, "billing", "", "ledger")
	if len(held) != 1 {
		t.Fatalf("the second member holds %v once the first expired, want partition 0", held)
	}
	if err := kafkaCommit(t, cl, "billing", first.id, first.generation, "ledger", 2, -1); err != kerr.UnknownMemberID {
		t.Fatalf("the expired member's late commit: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if err := kafkaHeartbeat(t, cl, "billing", first); err != kerr.UnknownMemberID {
		t.Fatalf("the expired member's heartbeat: %v, want UNKNOWN_MEMBER_ID", err)
	}
	if off := kafkaCommitted(t, cl, "billing", "ledger"); off != 1 {
		t.Fatalf("committed %d after the refused commit, want 1", off)
	}
	if err := kafkaCommit(t, cl, "billing", second.id, second.generation, "ledger", 2, -1); err != nil {
		t.Fatalf("the new holder's commit: %v", err)
	}

	// The second member leaves; the first comes back under its old id
	// and regains the partition, under a newer generation.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "billing"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = second.id
	leave.Members = append(leave.Members, lm)
	if _, err := leave.RequestWith(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	back, held := kafkaJoin(t, cl, "billing", first.id, "ledger")
	if len(held) != 1 || back.generation <= first.generation {
		t.Fatalf("the returning member holds %v at generation %d (was %d); want partition 0 at a newer one", held, back.generation, first.generation)
	}
	if err := kafkaCommit(t, cl, "billing", back.id, first.generation, "ledger", 3, -1); err != kerr.IllegalGeneration {
		t.Fatalf("a commit under the generation before the regain: %v, want ILLEGAL_GENERATION", err)
	}
	if err := kafkaCommit(t, cl, "billing", back.id, back.generation, "ledger", 3, -1); err != nil {
		t.Fatalf("a commit under the regained generation: %v", err)
	}
	if off := kafkaCommitted(t, cl, "billing", "ledger"); off != 3 {
		t.Fatalf("committed %d, want 3", off)
	}
}
