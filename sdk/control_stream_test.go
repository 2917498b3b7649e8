package sdk_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/sdk"
)

// A client's calls (admin requests, attaching a consumer, commits) go on
// a control stream that is open only while one is in flight: an idle
// client holds no stream the node keeps a reader for. These tests run a
// node of their own, so that its count of open streams is theirs alone.

// startOwnNode starts a node in a temporary directory and dials it as its
// admin.
func startOwnNode(t *testing.T) (context.Context, *node.Node, *sdk.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	n, err := node.Open(ctx, node.Config{DataDir: dir, Listen: "127.0.0.1:0", RetentionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	c, err := sdk.Dial(ctx, n.Addr(), sdk.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return ctx, n, c
}

// waitOpenStreams waits until the node holds want open streams. A stream
// the client ended is freed once the node has read its end, a moment
// later: the count is looked at again, a bounded number of times.
func waitOpenStreams(t *testing.T, n *node.Node, want int64, when string) {
	t.Helper()
	var got int64
	for range 2000 {
		if got = n.Stats().StreamsOpen; got == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: the node holds %d open streams, want %d", when, got, want)
}

func TestAnIdleClientHoldsNoStreamOnTheNode(t *testing.T) {
	ctx, n, c := startOwnNode(t)
	waitOpenStreams(t, n, 0, "after Dial (the stream it authenticated on)")

	topic := fmt.Sprintf("idle-%d", time.Now().UnixNano())
	if _, err := c.CreateTopic(ctx, topic, sdk.TopicConfig{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTopics(ctx); err != nil {
		t.Fatal(err)
	}
	waitOpenStreams(t, n, 0, "after admin calls one at a time")

	// Calls made together share the control stream while any is in
	// flight; each gets its own reply.
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			d, err := c.DescribeTopic(ctx, topic)
			if err == nil && d.Config.Partitions != 2 {
				err = fmt.Errorf("described %d partitions, want 2", d.Config.Partitions)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	waitOpenStreams(t, n, 0, "after 50 concurrent calls")
	if _, err := c.DescribeTopic(ctx, topic); err != nil {
		t.Fatalf("a call after the client was idle: %v", err)
	}
}

// A device that produces and polls holds its producer's stream and its
// consumer's poll stream, and nothing else: attaching the consumer and
// committing open a control stream only for as long as they take.
func TestAProducingAndPollingClientHoldsTwoStreams(t *testing.T) {
	ctx, n, c := startOwnNode(t)
	topic := fmt.Sprintf("device-%d", time.Now().UnixNano())
	if _, err := c.CreateTopic(ctx, topic, sdk.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	cons, err := c.NewConsumer(ctx, topic, sdk.WithConsumerName("device"),
		sdk.WithMaxWait(time.Hour), sdk.WithPrefetch(false))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := cons.Poll(ctx)
	if err != nil || len(recs) != 1 || string(recs[0].Value) != "first" {
		t.Fatalf("first poll: %d records, %v", len(recs), err)
	}
	if err := cons.Commit(ctx, recs...); err != nil {
		t.Fatal(err)
	}

	// The next poll parks on the node: no records yet.
	type polledRecords struct {
		recs []*sdk.Record
		err  error
	}
	polled := make(chan polledRecords, 1)
	go func() {
		recs, err := cons.Poll(ctx)
		polled <- polledRecords{recs, err}
	}()
	waitOpenStreams(t, n, 2, "with a producer's stream and a parked poll")

	if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte("second")}); err != nil {
		t.Fatal(err)
	}
	second := <-polled
	if recs = second.recs; second.err != nil || len(recs) != 1 || string(recs[0].Value) != "second" {
		t.Fatalf("the parked poll returned %d records, %v", len(recs), second.err)
	}
	if err := cons.Commit(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	committed, err := cons.Committed(ctx)
	if err != nil || len(committed) != 1 || committed[0].Offset != 2 {
		t.Fatalf("committed %+v, %v; want offset 2", committed, err)
	}
	waitOpenStreams(t, n, 2, "after commits")

	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitOpenStreams(t, n, 0, "with the producer and consumer closed")
}
