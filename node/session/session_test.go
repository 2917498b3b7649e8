package session

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// The handlers are methods of a call of a token's session, which no
// transport builds here: a token's scopes decide what each request may do,
// and a request served through a call is a request served (node's
// listener tests do the same over QUIC and Kafka).

// values lists the records of stored batches as offset:value.
func values(t *testing.T, batches []byte) []string {
	t.Helper()
	var out []string
	for len(batches) > 0 {
		b, rest, err := wire.NextBatch(batches)
		if err != nil {
			t.Fatal(err)
		}
		it, err := record.NewRecordIterator(b, record.BatchMaxSize)
		if err != nil {
			t.Fatal(err)
		}
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		batches = rest
	}
	return out
}

func TestCallsCheckTheTokensScopes(t *testing.T) {
	n := newTestNode(t)
	ctx := t.Context()
	admin := n.session(wire.AllTopics, wire.ScopeAdmin|wire.ScopeProduce|wire.ScopeConsume).Call(0)
	for _, name := range []string{"sensors", "billing"} {
		if _, err := admin.CreateTopic(ctx, &wire.CreateTopicRequest{Name: name, Config: wire.TopicConfig{Partitions: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	reader := n.session("sensors", wire.ScopeConsume).Call(0)

	if _, err := reader.CreateTopic(ctx, &wire.CreateTopicRequest{Name: "sensors2", Config: wire.TopicConfig{Partitions: 1}}); !errors.Is(err, ErrForbidden) {
		t.Errorf("create topic without the admin scope: %v, want ErrForbidden", err)
	}
	list, err := reader.ListTopics(ctx, &wire.ListTopicsRequest{})
	if err != nil || len(list.Topics) != 1 || list.Topics[0].Name != "sensors" {
		t.Errorf("list topics of a token of sensors: %+v, %v; want sensors alone", list, err)
	}
	if _, err := reader.DescribeTopic(ctx, &wire.DescribeTopicRequest{Name: "billing"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("describe another topic: %v, want ErrForbidden", err)
	}
	produce := &wire.ProduceRequest{Topic: "sensors", Batch: ownertest.Batch(t, "21.5")}
	if _, err := reader.Produce(ctx, produce); !errors.Is(err, ErrForbidden) {
		t.Errorf("produce without the produce scope: %v, want ErrForbidden", err)
	}
	poll := &wire.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerAnonymous},
		Partitions: []wire.PollPartition{{Topic: "billing", Position: wire.Position{Mode: wire.PositionFirst}}}}
	if rep, err := reader.Poll(ctx, poll); err == nil && rep.Partitions[0].Status != wire.StatusForbidden {
		t.Errorf("poll another topic: %+v, want forbidden", rep.Partitions[0])
	}
	if _, err := reader.CreateToken(ctx, &wire.CreateTokenRequest{Topic: wire.AllTopics, Scopes: wire.ScopeAdmin}); !errors.Is(err, ErrForbidden) {
		t.Errorf("a token of one topic mints one of every topic: %v, want ErrForbidden", err)
	}

	// What the admin's call appended, the reader's call reads.
	if _, err := admin.Produce(ctx, produce); err != nil {
		t.Fatal(err)
	}
	poll.Partitions[0].Topic = "sensors"
	rep, err := reader.Poll(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.ReleasePolled()
	// The reply refers to the stored batches (BatchParts) until it is
	// written and the call releases them.
	if got := values(t, bytes.Join(rep.Partitions[0].BatchParts, nil)); !slices.Equal(got, []string{"0:21.5"}) {
		t.Errorf("poll after a produce: %v (status %s), want 0:21.5", got, rep.Partitions[0].Status)
	}
}

// A session refuses every request once its token is revoked, with the
// status a QUIC reply would carry.
func TestSessionRefusesARevokedToken(t *testing.T) {
	n := newTestNode(t)
	ctx := t.Context()
	s := n.session(wire.AllTopics, wire.ScopeAdmin)
	if _, err := s.ListTopics(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := n.tokens.Revoke(ctx, s.TokenID()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListTopics(ctx); !errors.Is(err, wire.StatusUnauthenticated) {
		t.Errorf("list topics with a revoked token: %v, want unauthenticated", err)
	}
	if err := s.Valid(); err == nil {
		t.Error("a session of a revoked token is valid")
	}
}
