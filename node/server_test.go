package node

import (
	"testing"
	"time"

	"github.com/ledgemq/ledge/record"

	"github.com/ledgemq/ledge/transport/wire"
)

func TestE2EProducePollCommit(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("orders", wire.TopicConfig{Partitions: 2})

	var id wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{Name: "p"}, &id)
	if rep, err := c.produce(c.main, "orders", 1, batch(t, id.ProducerID, id.ProducerEpoch, 0, "a", "b", "c")); err != nil {
		t.Fatal(err)
	} else if rep.BaseOffset != 0 || rep.LastOffset != 2 || rep.Duplicate {
		t.Fatalf("produce reply %+v, want offsets 0..2", rep)
	}

	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "billing"}, &att)
	me := named("billing", att.Session)
	first := c.pollPartition(c.main, me, "orders", 1, wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}, 0)
	if first.Status != wire.StatusOK || !eq(values(t, first.Batches), []string{"0:a", "1:b", "2:c"}) || first.Next != 3 {
		t.Fatalf("first poll: status %s, values %v, next %d", first.Status, values(t, first.Batches), first.Next)
	}

	var commit wire.CommitReply
	c.mustCall(&wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{
		{Topic: "orders", Partition: 1, Offset: first.Next, Token: first.Token},
	}}, &commit)
	if r := commit.Partitions[0]; r.Status != wire.StatusOK || r.Offset != 3 {
		t.Fatalf("commit: %+v", r)
	}
	if _, err := c.produce(c.main, "orders", 1, batch(t, id.ProducerID, id.ProducerEpoch, 3, "d", "e")); err != nil {
		t.Fatal(err)
	}

	// A new process attaching under the name resumes at the committed
	// offset and fences the first one.
	c2 := tn.mustDial(t, tn.admin)
	var att2 wire.AttachConsumerReply
	c2.mustCall(&wire.AttachConsumerRequest{Name: "billing"}, &att2)
	next := c2.pollPartition(c2.main, named("billing", att2.Session), "orders", 1, wire.Position{Mode: wire.PositionNext}, 0)
	if next.Status != wire.StatusOK || !eq(values(t, next.Batches), []string{"3:d", "4:e"}) {
		t.Fatalf("poll next: status %s %q, values %v", next.Status, next.Message, values(t, next.Batches))
	}
	stale := c.pollPartition(c.main, me, "orders", 1, wire.Position{Mode: wire.PositionNext}, 0)
	if stale.Status != wire.StatusFencedSession {
		t.Fatalf("poll by the fenced session: status %s, want %s", stale.Status, wire.StatusFencedSession)
	}

	var got wire.GetCommittedReply
	c2.mustCall(&wire.GetCommittedRequest{Consumer: named("billing", att2.Session),
		Partitions: []wire.TopicPartition{{Topic: "orders", Partition: 1}, {Topic: "orders", Partition: 0}}}, &got)
	if p := got.Partitions[0]; p.Status != wire.StatusOK || !p.HasOffset || p.Offset != 3 || p.History != 1 {
		t.Fatalf("committed on partition 1: %+v", p)
	}
	if p := got.Partitions[1]; p.Status != wire.StatusOK || p.HasOffset {
		t.Fatalf("committed on partition 0: %+v", p)
	}
}

func TestE2ELongPollAnsweredByProduce(t *testing.T) {
	tn := startNode(t, nil, nil)
	parked := make(chan struct{}, 1)
	tn.onPark = func() { parked <- struct{}{} }
	admin := tn.mustDial(t, tn.admin)
	admin.createTopic("events", wire.TopicConfig{Partitions: 2})

	consumer := tn.mustDial(t, tn.admin)
	ch := consumer.send(consumer.stream(), &wire.PollRequest{
		MaxWait: safety, // answered by the produce, long before
		Partitions: []wire.PollPartition{
			{Topic: "events", Partition: 0, Position: wire.Position{Mode: wire.PositionOffset, Offset: 0}},
			{Topic: "events", Partition: 1, Position: wire.Position{Mode: wire.PositionOffset, Offset: 0}},
		},
	})
	<-parked
	select {
	case r := <-ch:
		t.Fatalf("the poll was answered before any record existed: %v", r.err)
	default:
	}
	if _, err := admin.produce(admin.main, "events", 1, batch(t, 0, 0, 0, "wake up")); err != nil {
		t.Fatal(err)
	}
	var rep wire.PollReply
	if err := await(t, ch, &rep); err != nil {
		t.Fatal(err)
	}
	p0, p1 := rep.Partitions[0], rep.Partitions[1]
	if p0.Status != wire.StatusOK || len(p0.Batches) != 0 || p0.Next != 0 {
		t.Errorf("partition 0: status %s, %d bytes, next %d; want OK, nothing, next 0", p0.Status, len(p0.Batches), p0.Next)
	}
	if p1.Status != wire.StatusOK || !eq(values(t, p1.Batches), []string{"0:wake up"}) || p1.Next != 1 || len(p1.Token) == 0 {
		t.Errorf("partition 1: status %s, values %v, next %d", p1.Status, values(t, p1.Batches), p1.Next)
	}
}

// TestE2EPipelinedProduce: produce N+1 is appended while N waits for its
// fsync, and the replies still leave in request order, only once durable.
func TestE2EPipelinedProduce(t *testing.T) {
	tn := startNode(t, newMemStorage(), nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	tp, err := tn.lookup("t", [16]byte{})
	if err != nil {
		t.Fatal(err)
	}
	log := tp.Logs[0]

	release := tn.store.holdDurability()
	s := c.stream()
	const n = 5
	var chs []<-chan reply
	for i := range n {
		chs = append(chs, c.send(s, &wire.ProduceRequest{Topic: "t", Batch: batch(t, 0, 0, 0, string(rune('a'+i)))}))
	}
	// All five are appended although none is durable.
	for {
		changed := log.Changed()
		if log.State().HighWatermark == n {
			break
		}
		<-changed
	}
	for i, ch := range chs {
		select {
		case r := <-ch:
			t.Fatalf("produce %d answered before it was durable: %v", i, r.err)
		default:
		}
	}
	release()
	for i, ch := range chs {
		var rep wire.ProduceReply
		if err := await(t, ch, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.BaseOffset != uint64(i) {
			t.Errorf("reply %d: base offset %d, want %d (request order)", i, rep.BaseOffset, i)
		}
	}
}

// TestE2EProducerRetryDoesNotDuplicate: the reply of a produce is lost and
// the producer sends the same batch again.
func TestE2EProducerRetryDoesNotDuplicate(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	var id wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{}, &id)

	b0 := batch(t, id.ProducerID, id.ProducerEpoch, 0, "x", "y")
	retry := append([]byte(nil), b0...)
	// The first attempt is sent on a stream whose reply is never read.
	lost := c.stream()
	_ = c.send(lost, &wire.ProduceRequest{Topic: "t", Batch: b0})
	first, err := c.produce(c.main, "t", 0, retry)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.produce(c.main, "t", 0, batch(t, id.ProducerID, id.ProducerEpoch, 0, "x", "y"))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.BaseOffset != 0 || again.LastOffset != 1 {
		t.Fatalf("retry: %+v, want the original offsets 0..1 as a duplicate", again)
	}
	_ = first
	next, err := c.produce(c.main, "t", 0, batch(t, id.ProducerID, id.ProducerEpoch, 2, "z"))
	if err != nil || next.BaseOffset != 2 {
		t.Fatalf("next batch: %+v, %v; want base offset 2", next, err)
	}
	all := c.pollOne(c.main, wire.Consumer{}, "t", wire.Position{Mode: wire.PositionFirst}, 0)
	if got := values(t, all.Batches); !eq(got, []string{"0:x", "1:y", "2:z"}) {
		t.Fatalf("log holds %v, want each record once", got)
	}
	// A batch from a gap in the sequence is refused, retryably.
	if _, err := c.produce(c.main, "t", 0, batch(t, id.ProducerID, id.ProducerEpoch, 9, "gap")); statusOfErr(err) != wire.StatusOutOfOrderSequence {
		t.Fatalf("gap: %v, want %s", err, wire.StatusOutOfOrderSequence)
	}
}

func TestE2EPurgeThenPollNext(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	info := c.createTopic("t", wire.TopicConfig{})
	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "c"}, &att)
	me := named("c", att.Session)

	if _, err := c.produce(c.main, "t", 0, batch(t, 0, 0, 0, "old1", "old2", "old3")); err != nil {
		t.Fatal(err)
	}
	before := c.pollOne(c.main, me, "t", wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}, 0)
	if len(values(t, before.Batches)) != 3 {
		t.Fatalf("before purge: %v", values(t, before.Batches))
	}

	var purge wire.PurgeReply
	c.mustCall(&wire.PurgeRequest{Topic: "t", TopicID: info.ID}, &purge)
	if p := purge.Partitions[0]; p.Status != wire.StatusOK || p.StartOffset != 3 || p.HighWatermark != 3 || p.History != 2 {
		t.Fatalf("purge reply %+v, want start 3, hw 3, history 2", p)
	}
	// A commit derived from the poll before the purge is fenced.
	var commit wire.CommitReply
	c.mustCall(&wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{
		{Topic: "t", Offset: before.Next, Token: before.Token},
	}}, &commit)
	if s := commit.Partitions[0].Status; s != wire.StatusStaleHistory {
		t.Fatalf("commit across the purge: %s, want %s", s, wire.StatusStaleHistory)
	}

	if _, err := c.produce(c.main, "t", 0, batch(t, 0, 0, 0, "new1", "new2")); err != nil {
		t.Fatal(err)
	}
	after := c.pollOne(c.main, me, "t", wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}, 0)
	if got := values(t, after.Batches); after.Status != wire.StatusOK || !eq(got, []string{"3:new1", "4:new2"}) || after.History != 2 {
		t.Fatalf("after purge: status %s %q, values %v, history %d", after.Status, after.Message, got, after.History)
	}
}

func TestE2ETopicAdministration(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	info := c.createTopic("a", wire.TopicConfig{Partitions: 3, Durability: wire.DurabilityNone})
	if info.Config.Partitions != 3 || info.Config.Durability != wire.DurabilityNone || info.ID == ([16]byte{}) {
		t.Fatalf("created %+v", info)
	}
	c.createTopic("b", wire.TopicConfig{})
	err := c.call(c.main, &wire.CreateTopicRequest{Name: "a"}, &wire.CreateTopicReply{})
	if statusOfErr(err) != wire.StatusTopicExists {
		t.Fatalf("second create: %v", err)
	}
	err = c.call(c.main, &wire.CreateTopicRequest{Name: "no/slash"}, &wire.CreateTopicReply{})
	if statusOfErr(err) != wire.StatusInvalidArgument {
		t.Fatalf("bad name: %v", err)
	}
	var list wire.ListTopicsReply
	c.mustCall(&wire.ListTopicsRequest{}, &list)
	if len(list.Topics) != 2 || list.Topics[0].Name != "a" || list.Topics[1].Name != "b" {
		t.Fatalf("list: %+v", list.Topics)
	}
	var desc wire.DescribeTopicReply
	c.mustCall(&wire.DescribeTopicRequest{Name: "a"}, &desc)
	if len(desc.Partitions) != 3 || desc.Partitions[2].History != 1 {
		t.Fatalf("describe: %+v", desc)
	}
	if _, err := c.produce(c.main, "a", 3, batch(t, 0, 0, 0, "x")); statusOfErr(err) != wire.StatusUnknownPartition {
		t.Fatalf("produce to partition 3 of 3: %v", err)
	}
	var st wire.GetPartitionStateReply
	c.mustCall(&wire.GetPartitionStateRequest{Topic: "a", Partitions: []uint32{1, 7}}, &st)
	if st.TopicID != info.ID || st.Partitions[0].Status != wire.StatusOK || st.Partitions[1].Status != wire.StatusUnknownPartition {
		t.Fatalf("partition state: %+v", st)
	}

	// Delete with a stale id refuses; with the right one deletes.
	stale := info.ID
	stale[0] ^= 1
	if err := c.call(c.main, &wire.DeleteTopicRequest{Name: "a", TopicID: stale}, &wire.DeleteTopicReply{}); statusOfErr(err) != wire.StatusTopicRecreated {
		t.Fatalf("delete with a stale id: %v", err)
	}
	c.mustCall(&wire.DeleteTopicRequest{Name: "a", TopicID: info.ID}, &wire.DeleteTopicReply{})
	if _, err := c.produce(c.main, "a", 0, batch(t, 0, 0, 0, "x")); statusOfErr(err) != wire.StatusUnknownTopic {
		t.Fatalf("produce to a deleted topic: %v", err)
	}
	again := c.createTopic("a", wire.TopicConfig{})
	if again.ID == info.ID {
		t.Fatal("a re-created topic kept its id")
	}
	if err := c.call(c.main, &wire.ProduceRequest{Topic: "a", TopicID: info.ID, Batch: batch(t, 0, 0, 0, "x")}, &wire.ProduceReply{}); statusOfErr(err) != wire.StatusTopicRecreated {
		t.Fatalf("produce naming the old topic id: %v", err)
	}
}

func TestE2ECloseAnswersParkedPolls(t *testing.T) {
	tn := startNode(t, nil, nil)
	parked := make(chan struct{}, 1)
	tn.onPark = func() { parked <- struct{}{} }
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	ch := c.send(c.stream(), &wire.PollRequest{
		MaxWait:    time.Hour,
		Partitions: []wire.PollPartition{{Topic: "t", Position: wire.Position{Mode: wire.PositionEnd}}},
	})
	<-parked
	if err := tn.Close(safetyContext(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var rep wire.PollReply
	if err := await(t, ch, &rep); err != nil {
		t.Fatalf("the parked poll got no reply: %v", err)
	}
	if s := rep.Partitions[0].Status; s != wire.StatusShuttingDown {
		t.Fatalf("parked poll at shutdown: %s, want %s", s, wire.StatusShuttingDown)
	}
}

// TestE2ECloseFinishesInFlightProduce: a produce waiting for its fsync when
// the node is asked to stop is answered once durable, before Close
// returns.
func TestE2ECloseFinishesInFlightProduce(t *testing.T) {
	tn := startNode(t, newMemStorage(), nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	tp, err := tn.lookup("t", [16]byte{})
	if err != nil {
		t.Fatal(err)
	}
	release := tn.store.holdDurability()
	ch := c.send(c.stream(), &wire.ProduceRequest{Topic: "t", Batch: batch(t, 0, 0, 0, "in flight")})
	for {
		changed := tp.Logs[0].Changed()
		if tp.Logs[0].State().HighWatermark == 1 {
			break
		}
		<-changed
	}
	closed := make(chan error, 1)
	go func() { closed <- tn.Close(safetyContext(t)) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a produce waited for durability", err)
	case r := <-ch:
		t.Fatalf("the produce was answered before it was durable: %v", r.err)
	default:
	}
	release()
	var rep wire.ProduceReply
	if err := await(t, ch, &rep); err != nil || rep.BaseOffset != 0 {
		t.Fatalf("in-flight produce: %+v, %v", rep, err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestE2EResetPositionAndTimestamps(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	for i, ts := range []int64{1000, 2000, 3000} {
		var b record.BatchBuilder
		b.Append(record.Record{Timestamp: ts, Value: []byte{'a' + byte(i)}})
		raw, err := b.Build(record.CompressionNone)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.produce(c.main, "t", 0, raw); err != nil {
			t.Fatal(err)
		}
	}
	byTime := c.pollOne(c.main, wire.Consumer{}, "t", wire.Position{Mode: wire.PositionTimestamp, Timestamp: 1500}, 0)
	if got := values(t, byTime.Batches); byTime.Status != wire.StatusOK || !eq(got, []string{"1:b", "2:c"}) {
		t.Fatalf("poll from timestamp 1500: %s %q %v", byTime.Status, byTime.Message, got)
	}

	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "r"}, &att)
	me := named("r", att.Session)
	all := c.pollOne(c.main, me, "t", wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}, 0)
	var commit wire.CommitReply
	c.mustCall(&wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{{Topic: "t", Offset: all.Next, Token: all.Token}}}, &commit)
	if commit.Partitions[0].Status != wire.StatusOK {
		t.Fatalf("commit: %+v", commit.Partitions[0])
	}
	// A plain commit may not go backwards; a reset may.
	c.mustCall(&wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{{Topic: "t", Offset: 1, Token: all.Token}}}, &commit)
	if r := commit.Partitions[0]; r.Status != wire.StatusCommitBackwards || r.Offset != 3 {
		t.Fatalf("backwards commit: %+v", r)
	}
	var committed wire.GetCommittedReply
	c.mustCall(&wire.GetCommittedRequest{Consumer: me, Partitions: []wire.TopicPartition{{Topic: "t"}}}, &committed)
	var reset wire.ResetPositionReply
	c.mustCall(&wire.ResetPositionRequest{Consumer: me, Partitions: []wire.ResetPartition{
		{Topic: "t", Position: wire.Position{Mode: wire.PositionTimestamp, Timestamp: 2000}, Token: committed.Partitions[0].Token},
	}}, &reset)
	if r := reset.Partitions[0]; r.Status != wire.StatusOK || r.Offset != 1 {
		t.Fatalf("reset to timestamp 2000: %+v", r)
	}
	again := c.pollOne(c.main, me, "t", wire.Position{Mode: wire.PositionNext}, 0)
	if got := values(t, again.Batches); !eq(got, []string{"1:b", "2:c"}) {
		t.Fatalf("poll next after the reset: %s %v", again.Status, got)
	}
	// An anonymous consumer cannot commit.
	err := c.call(c.main, &wire.CommitRequest{Offsets: []wire.CommitOffset{{Topic: "t", Offset: 1, Token: all.Token}}}, &commit)
	if statusOfErr(err) != wire.StatusInvalidArgument {
		t.Fatalf("anonymous commit: %v", err)
	}
}

func TestE2EParkedPollLimit(t *testing.T) {
	tn := startNode(t, nil, func(c *Config) { c.MaxParkedPolls = 1 })
	parked := make(chan struct{}, 1)
	tn.onPark = func() { parked <- struct{}{} }
	c := tn.mustDial(t, tn.admin)
	c.createTopic("empty", wire.TopicConfig{})
	c.createTopic("full", wire.TopicConfig{})
	if _, err := c.produce(c.main, "full", 0, batch(t, 0, 0, 0, "x")); err != nil {
		t.Fatal(err)
	}
	first := c.send(c.stream(), &wire.PollRequest{MaxWait: safety,
		Partitions: []wire.PollPartition{{Topic: "empty", Position: wire.Position{Mode: wire.PositionEnd}}}})
	<-parked
	// Past the limit, a poll that finds nothing is told to back off...
	err := c.call(c.stream(), &wire.PollRequest{MaxWait: safety,
		Partitions: []wire.PollPartition{{Topic: "empty", Position: wire.Position{Mode: wire.PositionEnd}}}}, &wire.PollReply{})
	if statusOfErr(err) != wire.StatusBusy {
		t.Fatalf("second parked poll: %v, want %s", err, wire.StatusBusy)
	}
	// ...and one that finds records is answered.
	if p := c.pollOne(c.stream(), wire.Consumer{}, "full", wire.Position{Mode: wire.PositionFirst}, safety); !eq(values(t, p.Batches), []string{"0:x"}) {
		t.Fatalf("poll with records past the limit: %s %v", p.Status, values(t, p.Batches))
	}
	// Deleting the topic wakes the parked poll.
	c.mustCall(&wire.DeleteTopicRequest{Name: "empty"}, &wire.DeleteTopicReply{})
	var rep wire.PollReply
	if err := await(t, first, &rep); err != nil {
		t.Fatal(err)
	}
	if s := rep.Partitions[0].Status; s != wire.StatusUnknownTopic {
		t.Fatalf("parked poll on a deleted topic: %s, want %s", s, wire.StatusUnknownTopic)
	}
}
