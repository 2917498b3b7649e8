package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// TestE2EPipelinedCommit: commit N+1 on a stream is ordered while commit N
// waits for its metadata sync; both replies leave in request order, only
// once durable.
//
// covers: G19 G20
func TestE2EPipelinedCommit(t *testing.T) {
	store := newMemStorage()
	tn := startNode(t, store, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	if _, err := c.produce(c.main, "t", 0, batch(t, 0, 0, 0, "a", "b", "c", "d")); err != nil {
		t.Fatal(err)
	}
	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "c"}, &att)
	me := named("c", att.Session)
	got := c.pollOne(c.main, me, "t", wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}, 0)
	if got.Next != 4 {
		t.Fatalf("poll: next %d, want 4", got.Next)
	}

	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	store.meta.SetSyncGate(func(ctx context.Context) error {
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	s := c.stream()
	commit := func(off uint64) <-chan reply {
		return c.send(s, &wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{
			{Topic: "t", Offset: off, Token: got.Token},
		}})
	}
	first, second := commit(2), commit(4)
	// Both commits wait for a sync: the second was ordered while the first
	// was not durable.
	for range 2 {
		select {
		case <-entered:
		case <-safetyContext(t).Done():
			t.Fatal("the second commit was not ordered while the first waited for its sync")
		}
	}
	for i, ch := range []<-chan reply{first, second} {
		select {
		case r := <-ch:
			t.Fatalf("commit %d answered before it was durable: %v", i, r.err)
		default:
		}
	}
	close(release)
	for i, ch := range []<-chan reply{first, second} {
		var rep wire.CommitReply
		if err := await(t, ch, &rep); err != nil {
			t.Fatal(err)
		}
		if r, want := rep.Partitions[0], []uint64{2, 4}[i]; r.Status != wire.StatusOK || r.Offset != want {
			t.Fatalf("commit %d: %+v, want offset %d", i, r, want)
		}
	}
	store.meta.SetSyncGate(nil)
	var committed wire.GetCommittedReply
	c.mustCall(&wire.GetCommittedRequest{Consumer: me, Partitions: []wire.TopicPartition{{Topic: "t"}}}, &committed)
	if p := committed.Partitions[0]; !p.HasOffset || p.Offset != 4 {
		t.Fatalf("committed after both: %+v", p)
	}
}

// TestE2EProduceReplyCarriesAppendTime: on an append-time topic the
// produce reply carries the time the node stamped, which is the time of
// every record the batch holds; a producer-time topic and a duplicate
// answer NoAppendTime.
func TestE2EProduceReplyCarriesAppendTime(t *testing.T) {
	now := time.UnixMilli(time.Now().UnixMilli())
	tn := startNode(t, nil, func(c *Config) { c.Now = func() time.Time { return now } })
	c := tn.mustDial(t, tn.admin)
	c.createTopic("stamped", wire.TopicConfig{Timestamps: wire.TimestampModeAppend})
	c.createTopic("kept", wire.TopicConfig{Timestamps: wire.TimestampModeProducer})
	var id wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{}, &id)

	b := batch(t, id.ProducerID, id.ProducerEpoch, 0, "x", "y") // producer time 1
	rep, err := c.produce(c.main, "stamped", 0, append([]byte(nil), b...))
	if err != nil {
		t.Fatal(err)
	}
	if rep.AppendTime != now.UnixMilli() {
		t.Fatalf("append time %d, want the node's clock %d", rep.AppendTime, now.UnixMilli())
	}
	p := c.pollOne(c.main, wire.Consumer{}, "stamped", wire.Position{Mode: wire.PositionFirst}, 0)
	for bs := p.Batches; len(bs) > 0; {
		one, rest, err := wire.NextBatch(bs)
		if err != nil {
			t.Fatal(err)
		}
		it, err := record.NewRecordIterator(one, record.BatchMaxSize)
		if err != nil {
			t.Fatal(err)
		}
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			if r.Timestamp != rep.AppendTime {
				t.Errorf("record %d: timestamp %d, want the reply's append time %d", r.Offset, r.Timestamp, rep.AppendTime)
			}
		}
		bs = rest
	}
	dup, err := c.produce(c.main, "stamped", 0, append([]byte(nil), b...))
	if err != nil || !dup.Duplicate || dup.AppendTime != wire.NoAppendTime {
		t.Fatalf("duplicate: %+v %v, want a duplicate with no append time", dup, err)
	}
	kept, err := c.produce(c.main, "kept", 0, batch(t, 0, 0, 0, "z"))
	if err != nil || kept.AppendTime != wire.NoAppendTime {
		t.Fatalf("producer-time topic: %+v %v, want no append time", kept, err)
	}
}

// TestE2EPollMaxMessages: a poll's max messages bounds the reply in whole
// stored batches, as max bytes does: at least one batch, and a further
// one only if the records delivered stay within the bound.
func TestE2EPollMaxMessages(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	for _, vs := range [][]string{{"a", "b"}, {"c", "d"}, {"e", "f"}} {
		if _, err := c.produce(c.main, "t", 0, batch(t, 0, 0, 0, vs...)); err != nil {
			t.Fatal(err)
		}
	}
	poll := func(from uint64, maxMessages uint32) wire.PollPartitionReply {
		var rep wire.PollReply
		c.mustCall(&wire.PollRequest{MaxMessages: maxMessages, Partitions: []wire.PollPartition{
			{Topic: "t", Position: wire.Position{Mode: wire.PositionOffset, Offset: from}},
		}}, &rep)
		return rep.Partitions[0]
	}
	for _, tc := range []struct {
		from uint64
		max  uint32
		want []string
		next uint64
	}{
		{0, 0, []string{"0:a", "1:b", "2:c", "3:d", "4:e", "5:f"}, 6}, // no bound by count
		{0, 1, []string{"0:a", "1:b"}, 2},                             // the first batch alone exceeds: it is served whole
		{0, 3, []string{"0:a", "1:b"}, 2},                             // a second batch would make 4
		{0, 4, []string{"0:a", "1:b", "2:c", "3:d"}, 4},
		{1, 3, []string{"0:a", "1:b", "2:c", "3:d"}, 4}, // record 0 is before the position: 1 + 2 delivered
	} {
		p := poll(tc.from, tc.max)
		if got := values(t, p.Batches); p.Status != wire.StatusOK || !eq(got, tc.want) || p.Next != tc.next {
			t.Errorf("poll from %d, max messages %d: %s %v next %d; want %v next %d", tc.from, tc.max, p.Status, got, p.Next, tc.want, tc.next)
		}
	}
}

// TestE2ESessionsAreNodeWide: a named consumer is one process across
// topics. One session serves a poll and commits over two topics, and a
// second process attaching under the name fences the first on both.
//
// covers: G13
func TestE2ESessionsAreNodeWide(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	infoA := c.createTopic("a", wire.TopicConfig{})
	c.createTopic("b", wire.TopicConfig{})
	for _, tp := range []string{"a", "b"} {
		if _, err := c.produce(c.main, tp, 0, batch(t, 0, 0, 0, tp+"1")); err != nil {
			t.Fatal(err)
		}
	}
	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "app"}, &att)
	me := named("app", att.Session)
	next := wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst}
	var both wire.PollReply
	c.mustCall(&wire.PollRequest{Consumer: me, Partitions: []wire.PollPartition{
		{Topic: "a", Position: next}, {Topic: "b", Position: next},
	}}, &both)
	for i, p := range both.Partitions {
		if p.Status != wire.StatusOK || p.Next != 1 {
			t.Fatalf("partition %d of a poll over two topics: %s %q next %d", i, p.Status, p.Message, p.Next)
		}
	}

	// Another process attaches, naming topic a: the first is fenced on
	// topic b too.
	c2 := tn.mustDial(t, tn.admin)
	var att2 wire.AttachConsumerReply
	c2.mustCall(&wire.AttachConsumerRequest{Topic: "a", Name: "app"}, &att2)
	if att2.Session <= att.Session || att2.TopicID != infoA.ID {
		t.Fatalf("second attach: %+v, want a higher session and topic a's id", att2)
	}
	var commit wire.CommitReply
	c.mustCall(&wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{
		{Topic: "b", Offset: 1, Token: both.Partitions[1].Token},
	}}, &commit)
	if s := commit.Partitions[0].Status; s != wire.StatusFencedSession {
		t.Fatalf("the first process's commit on topic b: %s, want %s", s, wire.StatusFencedSession)
	}
	if p := c.pollOne(c.main, me, "b", next, 0); p.Status != wire.StatusFencedSession {
		t.Fatalf("the first process's poll on topic b: %s, want %s", p.Status, wire.StatusFencedSession)
	}
	// The new process resumes both topics under its one session.
	me2 := named("app", att2.Session)
	var resumed wire.PollReply
	c2.mustCall(&wire.PollRequest{Consumer: me2, Partitions: []wire.PollPartition{
		{Topic: "a", Position: next}, {Topic: "b", Position: next},
	}}, &resumed)
	offsets := make([]wire.CommitOffset, 0, 2)
	for i, p := range resumed.Partitions {
		if p.Status != wire.StatusOK || p.Next != 1 {
			t.Fatalf("the new process's poll of partition %d: %s %q next %d", i, p.Status, p.Message, p.Next)
		}
		offsets = append(offsets, wire.CommitOffset{Topic: []string{"a", "b"}[i], Offset: p.Next, Token: p.Token})
	}
	c2.mustCall(&wire.CommitRequest{Consumer: me2, Offsets: offsets}, &commit)
	for i, r := range commit.Partitions {
		if r.Status != wire.StatusOK || r.Offset != 1 {
			t.Fatalf("the new process's commit of partition %d: %+v", i, r)
		}
	}
	err := c2.call(c2.main, &wire.AttachConsumerRequest{Topic: "nope", Name: "app"}, &wire.AttachConsumerReply{})
	if statusOfErr(err) != wire.StatusUnknownTopic {
		t.Fatalf("attach naming an unknown topic: %v", err)
	}
}

// TestE2EReinitProducerFencesZombie: an unnamed producer that
// re-initializes with its id gets the same id at the next epoch, durable
// before the reply. Its earlier incarnation is a zombie: its batches and
// its own re-initialization are refused, and after a node restart the
// epoch is not handed out again.
//
// covers: G11
func TestE2EReinitProducerFencesZombie(t *testing.T) {
	dir := t.TempDir()
	tn := startNode(t, nil, func(c *Config) { c.DataDir = dir })
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{Partitions: 2})
	var zombie wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{}, &zombie)
	if _, err := c.produce(c.main, "t", 0, batch(t, zombie.ProducerID, zombie.ProducerEpoch, 0, "z0")); err != nil {
		t.Fatal(err)
	}

	// A new process takes over the producer id.
	c2 := tn.mustDial(t, tn.admin)
	var live wire.InitProducerReply
	c2.mustCall(&wire.InitProducerRequest{ProducerID: zombie.ProducerID, ProducerEpoch: zombie.ProducerEpoch}, &live)
	if live.ProducerID != zombie.ProducerID || live.ProducerEpoch != zombie.ProducerEpoch+1 {
		t.Fatalf("re-initialization: %+v, want id %d at epoch %d", live, zombie.ProducerID, zombie.ProducerEpoch+1)
	}
	// The zombie is refused on every partition, including one the new
	// incarnation never wrote.
	for p := range uint32(2) {
		_, err := c.produce(c.main, "t", p, batch(t, zombie.ProducerID, zombie.ProducerEpoch, int32(p), "late"))
		if statusOfErr(err) != wire.StatusFencedProducer {
			t.Fatalf("zombie batch on partition %d: %v, want %s", p, err, wire.StatusFencedProducer)
		}
	}
	if rep, err := c2.produce(c2.main, "t", 0, batch(t, live.ProducerID, live.ProducerEpoch, 0, "n0")); err != nil || rep.BaseOffset != 1 {
		t.Fatalf("the new incarnation's first batch: %+v %v", rep, err)
	}
	// The zombie cannot re-initialize its way back.
	err := c.call(c.main, &wire.InitProducerRequest{ProducerID: zombie.ProducerID, ProducerEpoch: zombie.ProducerEpoch}, &wire.InitProducerReply{})
	if statusOfErr(err) != wire.StatusFencedProducer {
		t.Fatalf("zombie re-initialization: %v, want %s", err, wire.StatusFencedProducer)
	}
	err = c.call(c.main, &wire.InitProducerRequest{ProducerID: 1 << 40}, &wire.InitProducerReply{})
	if statusOfErr(err) != wire.StatusUnknownProducer {
		t.Fatalf("re-initialization of an id never handed out: %v, want %s", err, wire.StatusUnknownProducer)
	}

	// After a restart the registration stands, and the next epoch is new.
	if err := tn.Close(safetyContext(t)); err != nil {
		t.Fatal(err)
	}
	tn2 := startNode(t, nil, func(c *Config) { c.DataDir = dir })
	c3 := tn2.mustDial(t, tn2.admin)
	if _, err := c3.produce(c3.main, "t", 1, batch(t, zombie.ProducerID, zombie.ProducerEpoch, 0, "late")); statusOfErr(err) != wire.StatusFencedProducer {
		t.Fatalf("zombie batch after a restart: %v", err)
	}
	var again wire.InitProducerReply
	c3.mustCall(&wire.InitProducerRequest{ProducerID: live.ProducerID, ProducerEpoch: live.ProducerEpoch}, &again)
	if again.ProducerID != live.ProducerID || again.ProducerEpoch != live.ProducerEpoch+1 {
		t.Fatalf("re-initialization after a restart: %+v, want epoch %d", again, live.ProducerEpoch+1)
	}
}

// TestE2ECloseClosesOwnersBeforeStorage: Node.Close takes every owner's
// last step before it closes the storage, so nothing reaches the storage
// through an owner once it closes.
//
// covers: G30
func TestE2ECloseClosesOwnersBeforeStorage(t *testing.T) {
	store := newMemStorage()
	tn := startNode(t, store, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{Partitions: 2})
	tp, err := tn.lookup("t", [16]byte{})
	if err != nil {
		t.Fatal(err)
	}
	var atClose []error
	store.onClose = func() {
		for _, o := range tp.Owners {
			_, err := o.Produce(context.Background(), batch(t, 0, 0, 0, "late"))
			atClose = append(atClose, err)
		}
	}
	if err := tn.Close(safetyContext(t)); err != nil {
		t.Fatal(err)
	}
	if len(atClose) != 2 {
		t.Fatalf("the storage was closed %d times with the owners", len(atClose))
	}
	for i, err := range atClose {
		if !errors.Is(err, owner.ErrOwnerClosed) {
			t.Errorf("owner %d when the storage closes: %v, want ErrOwnerClosed", i, err)
		}
	}
}
