package node

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// A poll parked on a topic that is deleted answers at once, with the
// topic's status, whether it parked for any record or for its key.
func TestE2EParkedPollAnswersWhenItsTopicIsDeleted(t *testing.T) {
	for _, key := range []wire.PollKey{{}, {Mode: wire.KeyExact, Key: []byte("device-7")}} {
		t.Run(key.Mode.String(), func(t *testing.T) {
			tn := startNode(t, nil, nil)
			parked := make(chan struct{}, 1)
			tn.onPark = func() { parked <- struct{}{} }
			c := tn.mustDial(t, tn.admin)
			c.createTopic("cmd", wire.TopicConfig{})
			ch := c.send(c.stream(), &wire.PollRequest{
				MaxWait: time.Hour, Key: key,
				Partitions: []wire.PollPartition{{Topic: "cmd", Position: wire.Position{Mode: wire.PositionEnd}}},
			})
			<-parked
			c.mustCall(&wire.DeleteTopicRequest{Name: "cmd"}, &wire.DeleteTopicReply{})
			var rep wire.PollReply
			if err := await(t, ch, &rep); err != nil {
				t.Fatalf("the parked poll got no reply: %v", err)
			}
			if s := rep.Partitions[0].Status; s != wire.StatusUnknownTopic {
				t.Fatalf("parked poll of a deleted topic: %s %q, want %s", s, rep.Partitions[0].Message, wire.StatusUnknownTopic)
			}
		})
	}
}

// Requests are pooled and reused: many devices producing and being woken
// at once each get their own replies, in order, with their own records.
// Under the race detector it checks that a request is let go of only once
// nothing uses it any more.
func TestE2EPooledRequestsKeepTheirOwnReplies(t *testing.T) {
	tn := startNode(t, nil, nil)
	admin := tn.mustDial(t, tn.admin)
	admin.createTopic("fleet", wire.TopicConfig{Durability: wire.DurabilityNone})
	admin.createTopic("cmd", wire.TopicConfig{Durability: wire.DurabilityNone})
	const devices, records = 8, 25
	var wg sync.WaitGroup
	for d := range devices {
		c := tn.mustDial(t, tn.admin)
		var id wire.InitProducerReply
		c.mustCall(&wire.InitProducerRequest{Name: fmt.Sprintf("device-%d", d)}, &id)
		prod, poll := c.stream(), c.stream()
		key := fmt.Sprintf("device-%d", d)
		wg.Go(func() {
			for i := range records {
				value := fmt.Sprintf("%s/%d", key, i)
				rep, err := c.produce(prod, "fleet", 0, keyedBatch(t, id.ProducerID, id.ProducerEpoch, int32(i), key, value))
				if err != nil {
					t.Errorf("%s: produce %d: %v", key, i, err)
					return
				}
				if rep.LastOffset != rep.BaseOffset {
					t.Errorf("%s: produce %d: offsets %d to %d for one record", key, i, rep.BaseOffset, rep.LastOffset)
				}
			}
		})
		wg.Go(func() {
			next := uint64(0)
			for got := 0; got < records; {
				var rep wire.PollReply
				err := c.call(poll, &wire.PollRequest{
					MaxWait: time.Minute, Key: wire.PollKey{Mode: wire.KeyExact, Key: []byte(key)},
					Partitions: []wire.PollPartition{{Topic: "cmd", Position: wire.Position{Mode: wire.PositionOffset, Offset: next}}},
				}, &rep)
				if err != nil {
					t.Errorf("%s: poll: %v", key, err)
					return
				}
				p := rep.Partitions[0]
				for _, v := range values(t, p.Batches) {
					var off, i int
					if _, err := fmt.Sscanf(v, "%d:cmd-"+key+"/%d", &off, &i); err != nil || i != got {
						t.Errorf("%s: command %q, want its command %d", key, v, got)
						return
					}
					got++
				}
				next = p.Next
			}
		})
	}
	var cid wire.InitProducerReply
	admin.mustCall(&wire.InitProducerRequest{Name: "controller"}, &cid)
	for i := range records {
		for d := range devices {
			key := fmt.Sprintf("device-%d", d)
			seq := int32(i*devices + d)
			if _, err := admin.produce(admin.main, "cmd", 0, keyedBatch(t, cid.ProducerID, cid.ProducerEpoch, seq, key, fmt.Sprintf("cmd-%s/%d", key, i))); err != nil {
				t.Fatalf("command %d to %s: %v", i, key, err)
			}
		}
	}
	wg.Wait()
}

// Replies that wait for durability come back to their own requests: on
// a stream of durability always, produces (whose reply waits for the
// log's fsync) and commits (whose reply waits on a goroutine of their
// own for the metadata sync) are sent back to back, many in flight, and
// each reply says what its request did, in request order.
func TestE2EPooledDeferredRepliesKeepTheirOrder(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{Durability: wire.DurabilityAlways})
	var att wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "c", Topic: "t"}, &att)
	if _, err := c.produce(c.main, "t", 0, batch(t, 0, 0, 0, "first")); err != nil {
		t.Fatal(err)
	}
	p := c.pollOne(c.main, named("c", att.Session), "t", wire.Position{Mode: wire.PositionFirst}, 0)
	p.Token = append([]byte(nil), p.Token...) // it aliased the reply's frame
	s := c.stream()
	const n = 60
	var produces, commits []<-chan reply
	for i := range n {
		produces = append(produces, c.send(s, &wire.ProduceRequest{Topic: "t", Batch: batch(t, 0, 0, 0, fmt.Sprint(i))}))
		commits = append(commits, c.send(s, &wire.CommitRequest{Consumer: named("c", att.Session),
			Offsets: []wire.CommitOffset{{Topic: "t", Offset: p.Next, Token: p.Token}}}))
	}
	for i := range n {
		var rep wire.ProduceReply
		if err := await(t, produces[i], &rep); err != nil || rep.BaseOffset != uint64(i+1) {
			t.Fatalf("produce %d: base offset %d, %v; want %d", i, rep.BaseOffset, err, i+1)
		}
		var crep wire.CommitReply
		if err := await(t, commits[i], &crep); err != nil || crep.Partitions[0].Status != wire.StatusOK || crep.Partitions[0].Offset != p.Next {
			t.Fatalf("commit %d: %+v, %v; want offset %d committed", i, crep, err, p.Next)
		}
	}
}
