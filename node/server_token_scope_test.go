package node

import (
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// TestE2ETokenScopesFollowTheTopicName pins the decision of
// docs/OPERATIONS.md ("Tokens are scoped by topic name"): a token for a
// topic name keeps its scopes on a topic re-created under that name, as
// NATS and Kafka permissions do, while nothing tied to the old topic's id
// carries over.
func TestE2ETokenScopesFollowTheTopicName(t *testing.T) {
	tn := startNode(t, nil, nil)
	admin := tn.mustDial(t, tn.admin)
	old := admin.createTopic("orders", wire.TopicConfig{})
	tok := createToken(t, admin, "orders", wire.ScopeProduce|wire.ScopeConsume)

	device := tn.mustDial(t, tok.Secret)
	if _, err := device.produce(device.main, "orders", 0, batch(t, 0, 0, 0, "to the first topic")); err != nil {
		t.Fatalf("produce to the first topic: %v", err)
	}

	admin.mustCall(&wire.DeleteTopicRequest{Name: "orders", TopicID: old.ID}, &wire.DeleteTopicReply{})
	recreated := admin.createTopic("orders", wire.TopicConfig{})
	if recreated.ID == old.ID {
		t.Fatal("the re-created topic kept its id")
	}

	// The same token, on the connection it had and on a new one, serves the
	// new topic of that name.
	for name, c := range map[string]*client{"kept connection": device, "new connection": tn.mustDial(t, tok.Secret)} {
		rep, err := c.produce(c.main, "orders", 0, batch(t, 0, 0, 0, "to the new topic: "+name))
		if err != nil {
			t.Fatalf("%s: produce to the re-created topic with the old token: %v", name, err)
		}
		got := c.pollOne(c.main, wire.Consumer{}, "orders", wire.Position{Mode: wire.PositionOffset, Offset: rep.BaseOffset}, 0)
		if got.Status != wire.StatusOK || len(values(t, got.Batches)) != 1 {
			t.Fatalf("%s: poll of the re-created topic: %s, %d batches", name, got.Status, len(got.Batches))
		}
	}
	// The new topic starts empty: the first topic's records are gone with
	// its id, whoever asks.
	got := device.pollOne(device.main, wire.Consumer{}, "orders", wire.Position{Mode: wire.PositionFirst}, 0)
	for _, v := range values(t, got.Batches) {
		if strings.HasSuffix(v, "to the first topic") {
			t.Fatalf("the re-created topic serves a record of the first: %q", v)
		}
	}
	// A request naming the first topic's id is refused.
	err := device.call(device.main, &wire.ProduceRequest{Topic: "orders", TopicID: old.ID, Batch: batch(t, 0, 0, 0, "x")}, &wire.ProduceReply{})
	if statusOfErr(err) != wire.StatusTopicRecreated {
		t.Fatalf("produce naming the first topic's id: %v, want %s", err, wire.StatusTopicRecreated)
	}
	// The name is all the token grants: another topic stays out of reach.
	admin.createTopic("other", wire.TopicConfig{})
	if _, err := device.produce(device.main, "other", 0, batch(t, 0, 0, 0, "x")); statusOfErr(err) != wire.StatusForbidden {
		t.Fatalf("produce to another topic: %v, want %s", err, wire.StatusForbidden)
	}
}
