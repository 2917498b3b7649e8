package owner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// A parked poll ends when one of its interrupts fires (a server shutting
// down, its topic deleted), as if its context had ended: no records, a
// canceled error, and nothing of the consumer's progress changed. A poll
// that finds records answers whatever its interrupts say.
func TestPollManyUntilEndsAParkedPollOnAnInterrupt(t *testing.T) {
	ctx := context.Background()
	m := ownertest.NewMeta()
	o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
	polls := []owner.PartitionPoll{{Owner: o, Request: owner.PollRequest{Consumer: owner.Consumer{Name: "device"}, From: owner.FromNext}}}
	for i, which := range []string{"shutdown", "deletion"} {
		fired := make(chan struct{})
		var stop owner.Interrupts
		stop[i] = fired
		done := make(chan []owner.PartitionResult)
		go func() { done <- owner.PollManyUntil(ctx, polls, time.Hour, stop, nil) }()
		close(fired)
		res := <-done
		if err := res[0].Err; !errors.Is(err, context.Canceled) || len(res[0].Result.Batches) > 0 {
			t.Fatalf("parked poll on %s: %v, %d batches; want context.Canceled and none", which, err, len(res[0].Result.Batches))
		}
	}
	if _, err := o.Produce(ctx, ownertest.BenchBatch(t, 1, 16)); err != nil {
		t.Fatal(err)
	}
	fired := make(chan struct{})
	close(fired)
	res := owner.PollManyUntil(ctx, polls, time.Hour, owner.Interrupts{fired, fired}, nil)
	if res[0].Err != nil || len(res[0].Result.Batches) != 1 || res[0].Result.Next != 1 {
		t.Fatalf("poll with a record: %v, %d batches, next %d; want the record", res[0].Err, len(res[0].Result.Batches), res[0].Result.Next)
	}
}
