package node

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// The handlers are methods of a call, which no transport builds here: a
// token's scopes decide what each request may do, and a request served
// through a call is a request served (the listener tests do the same over
// QUIC).

// callAs is a call of the session of a new token with scopes on topic.
func callAs(t *testing.T, tn *testNode, topic string, scopes wire.Scope) *call {
	t.Helper()
	tok, _, err := tn.tokens.Create(t.Context(), "test", topic, scopes, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &call{n: tn.Node, tok: tok}
}

func TestCallsCheckTheTokensScopes(t *testing.T) {
	tn := startNode(t, newMemStorage(), nil)
	ctx := safetyContext(t)
	admin := callAs(t, tn, wire.AllTopics, wire.ScopeAdmin|wire.ScopeProduce|wire.ScopeConsume)
	for _, name := range []string{"sensors", "billing"} {
		if _, err := admin.createTopic(ctx, &wire.CreateTopicRequest{Name: name, Config: wire.TopicConfig{Partitions: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	reader := callAs(t, tn, "sensors", wire.ScopeConsume)

	if _, err := reader.createTopic(ctx, &wire.CreateTopicRequest{Name: "sensors2", Config: wire.TopicConfig{Partitions: 1}}); !errors.Is(err, ErrForbidden) {
		t.Errorf("create topic without the admin scope: %v, want ErrForbidden", err)
	}
	list, err := reader.listTopics(ctx, &wire.ListTopicsRequest{})
	if err != nil || len(list.Topics) != 1 || list.Topics[0].Name != "sensors" {
		t.Errorf("list topics of a token of sensors: %+v, %v; want sensors alone", list, err)
	}
	if _, err := reader.describeTopic(ctx, &wire.DescribeTopicRequest{Name: "billing"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("describe another topic: %v, want ErrForbidden", err)
	}
	produce := &wire.ProduceRequest{Topic: "sensors", Batch: batch(t, 0, 0, 0, "21.5")}
	if _, err := reader.produce(ctx, produce); !errors.Is(err, ErrForbidden) {
		t.Errorf("produce without the produce scope: %v, want ErrForbidden", err)
	}
	poll := &wire.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerAnonymous},
		Partitions: []wire.PollPartition{{Topic: "billing", Position: wire.Position{Mode: wire.PositionFirst}}}}
	if rep, err := reader.poll(ctx, poll); err == nil && rep.Partitions[0].Status != wire.StatusForbidden {
		t.Errorf("poll another topic: %+v, want forbidden", rep.Partitions[0])
	}
	if _, err := reader.createToken(ctx, &wire.CreateTokenRequest{Topic: wire.AllTopics, Scopes: wire.ScopeAdmin}); !errors.Is(err, ErrForbidden) {
		t.Errorf("a token of one topic mints one of every topic: %v, want ErrForbidden", err)
	}

	// What the admin's call appended, the reader's call reads.
	if _, err := admin.produce(ctx, produce); err != nil {
		t.Fatal(err)
	}
	poll.Partitions[0].Topic = "sensors"
	rep, err := reader.poll(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.releasePolled()
	// The reply refers to the stored batches (BatchParts) until it is
	// written and the call releases them.
	if got := values(t, bytes.Join(rep.Partitions[0].BatchParts, nil)); !eq(got, []string{"0:21.5"}) {
		t.Errorf("poll after a produce: %v (status %s), want 0:21.5", got, rep.Partitions[0].Status)
	}
}
