package owner_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// A commit is acknowledged only once durable, and the owner does not hold
// its lock while it waits: other consumers poll and commit, producers
// append, in the meantime.
//
// covers: G19 G20
func TestCommitWaitsForSyncOutsideTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
		if _, err := o.Produce(ctx, ownertest.Batch(t, "a", "b")); err != nil {
			t.Fatal(err)
		}
		a := owner.Consumer{Name: "a"}
		res, err := o.Poll(ctx, owner.PollRequest{Consumer: a, From: owner.FromNext})
		if err != nil {
			t.Fatal(err)
		}

		release := make(chan struct{})
		m.SetSyncGate(func(ctx context.Context) error { <-release; return nil })
		done := make(chan error, 1)
		go func() { done <- o.Commit(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 2}) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("commit returned before its sync: %v", err)
		default:
		}

		// While the sync is pending, the partition keeps serving.
		if _, err := o.Produce(ctx, ownertest.Batch(t, "c")); err != nil {
			t.Fatal(err)
		}
		got, err := o.Poll(ctx, owner.PollRequest{Consumer: owner.Consumer{Name: "b"}, From: owner.FromNext})
		if err != nil || got.Next != 3 {
			t.Fatalf("poll during a pending sync: next %d, %v", got.Next, err)
		}
		if m.Syncs() != 0 {
			t.Fatalf("%d syncs completed, want 0", m.Syncs())
		}

		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if b, ok, _ := o.LogOf().Bookmark("c/a"); !ok || b.Offset != 2 {
			t.Fatalf("bookmark after commit: %+v %v", b, ok)
		}
		// Durable means it survives a restart.
		m.SetSyncGate(nil)
		m2 := m.Restart()
		if v, ok, _ := m2.Get([]byte("bm/t/0/c/a")); !ok || string(v) != "2@1" {
			t.Fatalf("bookmark after restart: %q %v", v, ok)
		}
	})
}

// A commit-on-delivery poll replies only once its commit is durable: at
// most once means the consumer never holds records whose commit could be
// lost.
//
// covers: G19
func TestDeliveryCommitIsDurableBeforeTheReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
		if _, err := o.Produce(ctx, ownertest.Batch(t, "a")); err != nil {
			t.Fatal(err)
		}
		fail := errors.New("injected sync failure")
		m.SetSyncGate(func(ctx context.Context) error { return fail })
		_, err := o.Poll(ctx, owner.PollRequest{Consumer: owner.Consumer{Name: "a"}, From: owner.FromNext, AutoCommit: owner.AutoCommitOnDelivery})
		if !errors.Is(err, fail) {
			t.Fatalf("poll with a failing commit sync: %v, want the sync error and no records", err)
		}
	})
}

// A multi-partition long poll wakes on any partition; each parked partition
// re-validates, and a purged one fails alone.
//
// covers: G7
func TestPollManyRevalidatesEachPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		l0, l1 := ownertest.NewLog(m, "t/0"), ownertest.NewLog(m, "t/1")
		o0 := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, l0)
		o1, err := owner.NewOwner(owner.OwnerConfig{Topic: ownertest.ScenarioTopic, Partition: 1, Log: l1, Meta: m, Producers: o0.ProducerRegistry(), Sessions: o0.SessionRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		c := owner.Consumer{Name: "c"}
		polls := []owner.PartitionPoll{
			{Owner: o0, Request: owner.PollRequest{Consumer: c, From: owner.FromNext}},
			{Owner: o1, Request: owner.PollRequest{Consumer: c, From: owner.FromNext}},
		}
		var out []owner.PartitionResult
		done := make(chan struct{})
		go func() { out = owner.PollMany(ctx, polls, time.Minute); close(done) }()
		synctest.Wait()

		// A purge of partition 0 wakes the poll; partition 0 is refused,
		// partition 1 (still current, still empty) answers empty.
		if _, err := o0.Purge(ctx); err != nil {
			t.Fatal(err)
		}
		<-done
		if !errors.Is(out[0].Err, fence.ErrStaleHistory) {
			t.Fatalf("partition 0: %v, want stale history", out[0].Err)
		}
		if out[1].Err != nil || len(out[1].Result.Batches) != 0 {
			t.Fatalf("partition 1: %+v", out[1])
		}

		// Data on partition 1 answers a new multi-partition poll.
		done = make(chan struct{})
		go func() { out = owner.PollMany(ctx, polls, time.Minute); close(done) }()
		synctest.Wait()
		if _, err := o1.Produce(ctx, ownertest.Batch(t, "x")); err != nil {
			t.Fatal(err)
		}
		<-done
		if out[0].Err != nil || len(out[0].Result.Batches) != 0 || out[1].Err != nil || len(out[1].Result.Batches) != 1 {
			t.Fatalf("after a produce on partition 1: %+v", out)
		}

		// Nothing arrives: the poll answers empty at the deadline.
		done = make(chan struct{})
		start := time.Now()
		go func() { out = owner.PollMany(ctx, polls, time.Minute); close(done) }()
		<-done
		if d := time.Since(start); d != time.Minute || out[0].Err != nil || out[1].Err != nil {
			t.Fatalf("timeout after %v: %+v", d, out)
		}
	})
}

// A poll of one partition through PollMany (a device's poll of its
// command partition) parks, wakes on a produce, answers empty at its
// deadline, and ends with its context.
func TestPollManyOnePartitionWakesTimesOutAndCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ownertest.NewMeta()
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
		polls := []owner.PartitionPoll{{Owner: o, Request: owner.PollRequest{Consumer: owner.Consumer{Name: "c"}, From: owner.FromNext}}}
		poll := func(ctx context.Context) <-chan []owner.PartitionResult {
			out := make(chan []owner.PartitionResult, 1)
			go func() { out <- owner.PollMany(ctx, polls, time.Minute) }()
			synctest.Wait()
			return out
		}

		got := poll(context.Background())
		if _, err := o.Produce(context.Background(), ownertest.Batch(t, "command")); err != nil {
			t.Fatal(err)
		}
		if out := <-got; out[0].Err != nil || len(out[0].Result.Batches) != 1 {
			t.Fatalf("woken by a produce: %+v", out[0])
		}

		start := time.Now()
		if out := <-poll(context.Background()); out[0].Err != nil || len(out[0].Result.Batches) != 0 || time.Since(start) != time.Minute {
			t.Fatalf("after %v with nothing new: %+v, want an empty answer at the minute", time.Since(start), out[0])
		}

		ctx, cancel := context.WithCancel(context.Background())
		got = poll(ctx)
		cancel()
		if out := <-got; !errors.Is(out[0].Err, context.Canceled) {
			t.Fatalf("canceled: %v", out[0].Err)
		}
	})
}

// A token of a topic deleted and re-created under the same name is refused
// by the new topic's owner, for polls, commits and resets alike.
//
// covers: G14
func TestTokenOfRecreatedTopic(t *testing.T) {
	ctx := context.Background()
	m := ownertest.NewMeta()
	old := ownertest.NewOwner(t, fence.TopicID{1}, m, ownertest.NewLog(m, "old/0"))
	if _, err := old.Produce(ctx, ownertest.Batch(t, "a", "b")); err != nil {
		t.Fatal(err)
	}
	c := owner.Consumer{Name: "c"}
	res, err := old.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext})
	if err != nil {
		t.Fatal(err)
	}
	renewed := ownertest.NewOwner(t, fence.TopicID{2}, m, ownertest.NewLog(m, "new/0"))
	if _, err := renewed.Produce(ctx, ownertest.Batch(t, "x", "y", "z")); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"commit": renewed.Commit(ctx, owner.CommitRequest{Consumer: c, Token: res.Token, Offset: 2}),
		"reset":  renewed.Reset(ctx, owner.CommitRequest{Consumer: c, Token: res.Token, Offset: 0}),
	} {
		if !errors.Is(err, fence.ErrTopicRecreated) {
			t.Errorf("%s with the old topic's token: %v", name, err)
		}
	}
	got, err := renewed.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext})
	if err != nil || got.Token.From != 0 || got.Next != 3 {
		t.Fatalf("the new topic starts empty for the consumer: %+v %v", got, err)
	}
}
