package node

import (
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// TestE2EGetCommittedWithoutSession: once a process attached under a
// name, asking for the name's committed offsets without a session reads
// them (no token) instead of being refused as a fenced session; a stale
// session is still refused.
func TestE2EGetCommittedWithoutSession(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{})
	if _, err := c.produce(c.main, "t", 0, batch(t, 0, 0, 0, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	get := func(who wire.Consumer) wire.Committed {
		t.Helper()
		var rep wire.GetCommittedReply
		c.mustCall(&wire.GetCommittedRequest{Consumer: who, Partitions: []wire.TopicPartition{{Topic: "t"}}}, &rep)
		if len(rep.Partitions) != 1 {
			t.Fatalf("%d partitions in the reply", len(rep.Partitions))
		}
		return rep.Partitions[0]
	}
	if p := get(named("c", 0)); p.Status != wire.StatusOK || p.HasOffset {
		t.Fatalf("before any attach: %+v", p)
	}

	var first, second wire.AttachConsumerReply
	c.mustCall(&wire.AttachConsumerRequest{Name: "c"}, &first)
	c.mustCall(&wire.AttachConsumerRequest{Name: "c"}, &second)
	me := named("c", second.Session)
	got := c.pollOne(c.main, me, "t", wire.Position{Mode: wire.PositionFirst}, 0)
	var rep wire.CommitReply
	c.mustCall(&wire.CommitRequest{Consumer: me, Offsets: []wire.CommitOffset{{Topic: "t", Offset: 2, Token: got.Token}}}, &rep)
	if rep.Partitions[0].Status != wire.StatusOK {
		t.Fatalf("commit: %+v", rep.Partitions[0])
	}

	if p := get(named("c", 0)); p.Status != wire.StatusOK || !p.HasOffset || p.Offset != 2 {
		t.Fatalf("without a session after attach: %+v, want offset 2", p)
	}
	if p := get(me); p.Status != wire.StatusOK || !p.HasOffset || p.Offset != 2 || len(p.Token) == 0 {
		t.Fatalf("as the attached session: %+v, want offset 2 and a token", p)
	}
	if p := get(named("c", first.Session)); p.Status == wire.StatusOK {
		t.Fatalf("a replaced session read the committed offset: %+v", p)
	}
}
