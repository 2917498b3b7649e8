package owner_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// Closing an owner wakes its parked polls with a retryable shutting-down
// error, refuses every later step, and never applies a queued automatic
// commit: after a restart the consumer is given the undone poll again.
//
// covers: G30
func TestOwnerCloseFailsParkedPollsAndDropsQueuedCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		l := ownertest.NewLog(m, "t/0")
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, l)
		if _, err := o.Produce(ctx, ownertest.Batch(t, "a", "b")); err != nil {
			t.Fatal(err)
		}
		// Delivered [0,2): its commit waits for the consumer's next poll.
		c := owner.Consumer{Name: "c"}
		first, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext, AutoCommit: owner.AutoCommitOnNextPoll})
		if err != nil || first.Next != 2 {
			t.Fatalf("first poll: %+v %v", first, err)
		}

		parked := make(chan error, 1)
		go func() {
			_, err := o.Poll(ctx, owner.PollRequest{Consumer: owner.Consumer{Name: "d"}, From: owner.FromEnd, MaxWait: time.Hour})
			parked <- err
		}()
		many := make(chan []owner.PartitionResult, 1)
		go func() {
			many <- owner.PollMany(ctx, []owner.PartitionPoll{{Owner: o, Request: owner.PollRequest{From: owner.FromEnd}}}, time.Hour)
		}()
		synctest.Wait()

		if err := o.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-parked; !errors.Is(err, owner.ErrOwnerClosed) || !errors.Is(err, owner.ErrShuttingDown) {
			t.Fatalf("parked poll at close: %v, want ErrOwnerClosed (shutting down)", err)
		}
		if out := <-many; !errors.Is(out[0].Err, owner.ErrOwnerClosed) {
			t.Fatalf("parked multi-partition poll at close: %+v", out[0])
		}

		// Every later step is refused, and changes nothing.
		if _, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext, AutoCommit: owner.AutoCommitOnNextPoll}); !errors.Is(err, owner.ErrOwnerClosed) {
			t.Fatalf("poll after close: %v", err)
		}
		if _, err := o.Produce(ctx, ownertest.Batch(t, "late")); !errors.Is(err, owner.ErrOwnerClosed) {
			t.Fatalf("produce after close: %v", err)
		}
		if err := o.Commit(ctx, owner.CommitRequest{Consumer: c, Token: first.Token, Offset: 2}); !errors.Is(err, owner.ErrOwnerClosed) {
			t.Fatalf("commit after close: %v", err)
		}
		if _, err := o.Purge(ctx); !errors.Is(err, owner.ErrOwnerClosed) {
			t.Fatalf("purge after close: %v", err)
		}
		if st := l.State(); st.HighWatermark != 2 || st.History != 1 {
			t.Fatalf("the log changed after close: %+v", st)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatalf("second Close: %v", err)
		}

		// The queued commit was never applied: the restarted node gives
		// the consumer [0,2) again (at least once).
		m2 := m.Restart()
		l.SetMeta(m2)
		again := ownertest.NewOwner(t, ownertest.ScenarioTopic, m2, l)
		res, err := again.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext, AutoCommit: owner.AutoCommitOnNextPoll})
		if err != nil || res.Token.From != 0 || res.Next != 2 {
			t.Fatalf("poll next after the restart: from %d next %d, %v; want [0,2) again", res.Token.From, res.Next, err)
		}
	})
}

// A poll whose read is in flight when the owner closes is refused at its
// completion: no records, no commit.
//
// covers: G30
func TestOwnerCloseRefusesCompletionInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		b := &fakeBackend{m: m, l: ownertest.NewLog(m, "t/0")}
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, b.l)
		if _, err := o.Produce(ctx, ownertest.Batch(t, "a")); err != nil {
			t.Fatal(err)
		}
		gate := b.suspendNextRead()
		done := make(chan error, 1)
		go func() {
			_, err := o.Poll(ctx, owner.PollRequest{Consumer: owner.Consumer{Name: "c"}, From: owner.FromNext, AutoCommit: owner.AutoCommitOnDelivery})
			done <- err
		}()
		<-gate.Arrived
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		close(gate.Release)
		if err := <-done; !errors.Is(err, owner.ErrOwnerClosed) {
			t.Fatalf("completion after close: %v, want ErrOwnerClosed", err)
		}
		if _, ok, _ := b.l.Bookmark("c/c"); ok {
			t.Fatal("a refused completion committed")
		}
	})
}

// Deleting a topic is an owner step too: a long poll parked on one of its
// partitions wakes with "topic deleted" (not a retryable shutdown), and a
// late commit from a poll of the deleted topic is refused the same way.
func TestOwnerCloseDeletedFailsPendingWorkAsTopicDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		l := ownertest.NewLog(m, "t/0")
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, l)
		if _, err := o.Produce(ctx, ownertest.Batch(t, "a")); err != nil {
			t.Fatal(err)
		}
		c := owner.Consumer{Name: "c"}
		first, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext})
		if err != nil {
			t.Fatal(err)
		}
		parked := make(chan error, 1)
		go func() {
			_, err := o.Poll(ctx, owner.PollRequest{Consumer: owner.Consumer{Name: "d"}, From: owner.FromEnd, MaxWait: time.Hour})
			parked <- err
		}()
		synctest.Wait()

		if err := o.CloseDeleted(ctx); err != nil {
			t.Fatalf("CloseDeleted: %v", err)
		}
		if err := <-parked; !errors.Is(err, owner.ErrTopicDeleted) {
			t.Fatalf("parked poll when its topic was deleted: %v, want ErrTopicDeleted", err)
		}
		if err := o.Commit(ctx, owner.CommitRequest{Consumer: c, Token: first.Token, Offset: 1}); !errors.Is(err, owner.ErrTopicDeleted) {
			t.Fatalf("late commit on a deleted topic: %v, want ErrTopicDeleted", err)
		}
	})
}
