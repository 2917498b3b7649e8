package owner

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Closing an owner wakes its parked polls with a retryable shutting-down
// error, refuses every later step, and never applies a queued automatic
// commit: after a restart the consumer is given the undone poll again.
//
// covers: G30
func TestOwnerCloseFailsParkedPollsAndDropsQueuedCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMemMeta()
		l := newMemLog(m, "t/0")
		o := newTestOwner(t, scenarioTopic, m, l)
		if _, err := o.Produce(ctx, testBatch(t, "a", "b")); err != nil {
			t.Fatal(err)
		}
		// Delivered [0,2): its commit waits for the consumer's next poll.
		c := Consumer{Name: "c"}
		first, err := o.Poll(ctx, PollRequest{Consumer: c, From: FromNext, AutoCommit: AutoCommitOnNextPoll})
		if err != nil || first.Next != 2 {
			t.Fatalf("first poll: %+v %v", first, err)
		}

		parked := make(chan error, 1)
		go func() {
			_, err := o.Poll(ctx, PollRequest{Consumer: Consumer{Name: "d"}, From: FromEnd, MaxWait: time.Hour})
			parked <- err
		}()
		many := make(chan []PartitionResult, 1)
		go func() {
			many <- PollMany(ctx, []PartitionPoll{{Owner: o, Request: PollRequest{From: FromEnd}}}, time.Hour)
		}()
		synctest.Wait()

		if err := o.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-parked; !errors.Is(err, ErrOwnerClosed) || !errors.Is(err, ErrShuttingDown) {
			t.Fatalf("parked poll at close: %v, want ErrOwnerClosed (shutting down)", err)
		}
		if out := <-many; !errors.Is(out[0].Err, ErrOwnerClosed) {
			t.Fatalf("parked multi-partition poll at close: %+v", out[0])
		}

		// Every later step is refused, and changes nothing.
		if _, err := o.Poll(ctx, PollRequest{Consumer: c, From: FromNext, AutoCommit: AutoCommitOnNextPoll}); !errors.Is(err, ErrOwnerClosed) {
			t.Fatalf("poll after close: %v", err)
		}
		if _, err := o.Produce(ctx, testBatch(t, "late")); !errors.Is(err, ErrOwnerClosed) {
			t.Fatalf("produce after close: %v", err)
		}
		if err := o.Commit(ctx, CommitRequest{Consumer: c, Token: first.Token, Offset: 2}); !errors.Is(err, ErrOwnerClosed) {
			t.Fatalf("commit after close: %v", err)
		}
		if _, err := o.Purge(ctx); !errors.Is(err, ErrOwnerClosed) {
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
		m2 := m.restart()
		l.meta = m2
		again := newTestOwner(t, scenarioTopic, m2, l)
		res, err := again.Poll(ctx, PollRequest{Consumer: c, From: FromNext, AutoCommit: AutoCommitOnNextPoll})
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
		m := newMemMeta()
		b := &fakeBackend{m: m, l: newMemLog(m, "t/0")}
		o := newTestOwner(t, scenarioTopic, m, b.l)
		if _, err := o.Produce(ctx, testBatch(t, "a")); err != nil {
			t.Fatal(err)
		}
		gate := b.suspendNextRead()
		done := make(chan error, 1)
		go func() {
			_, err := o.Poll(ctx, PollRequest{Consumer: Consumer{Name: "c"}, From: FromNext, AutoCommit: AutoCommitOnDelivery})
			done <- err
		}()
		<-gate.arrived
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		close(gate.release)
		if err := <-done; !errors.Is(err, ErrOwnerClosed) {
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
		m := newMemMeta()
		l := newMemLog(m, "t/0")
		o := newTestOwner(t, scenarioTopic, m, l)
		if _, err := o.Produce(ctx, testBatch(t, "a")); err != nil {
			t.Fatal(err)
		}
		c := Consumer{Name: "c"}
		first, err := o.Poll(ctx, PollRequest{Consumer: c, From: FromNext})
		if err != nil {
			t.Fatal(err)
		}
		parked := make(chan error, 1)
		go func() {
			_, err := o.Poll(ctx, PollRequest{Consumer: Consumer{Name: "d"}, From: FromEnd, MaxWait: time.Hour})
			parked <- err
		}()
		synctest.Wait()

		if err := o.CloseDeleted(ctx); err != nil {
			t.Fatalf("CloseDeleted: %v", err)
		}
		if err := <-parked; !errors.Is(err, ErrTopicDeleted) {
			t.Fatalf("parked poll when its topic was deleted: %v, want ErrTopicDeleted", err)
		}
		if err := o.Commit(ctx, CommitRequest{Consumer: c, Token: first.Token, Offset: 1}); !errors.Is(err, ErrTopicDeleted) {
			t.Fatalf("late commit on a deleted topic: %v, want ErrTopicDeleted", err)
		}
	})
}
