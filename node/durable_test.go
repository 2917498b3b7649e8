package node

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/transport/wire"
)

// OrderProduce and OrderCommit return once their effects are ordered; the
// Durable they return says when the effects are durable. A second append
// is ordered after the first while the first is not durable yet, and a
// commit is seen by the owner's next step before its sync.
//
// covers: G19 G20
func TestOrderedEffectsBecomeDurableLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := newMemStorage()
		st, err := store.CreateTopic("t", wire.TopicConfig{})
		if err != nil {
			t.Fatal(err)
		}
		o, err := owner.NewOwner(owner.OwnerConfig{Topic: st.ID, Log: st.Partitions[0], Meta: store.meta})
		if err != nil {
			t.Fatal(err)
		}

		release := store.holdDurability()
		r1, d1, err := o.OrderProduce(ctx, ownertest.Batch(t, "a", "b"))
		if err != nil {
			t.Fatal(err)
		}
		r2, d2, err := o.OrderProduce(ctx, ownertest.Batch(t, "c"))
		if err != nil {
			t.Fatal(err)
		}
		if r1.Base != 0 || r1.Last != 1 || r2.Base != 2 || r2.Last != 2 {
			t.Fatalf("ordered at %+v and %+v, want 0..1 then 2", r1, r2)
		}
		waited := make(chan error, 2)
		go func() { waited <- d1.Wait(ctx) }()
		go func() { waited <- d2.Wait(ctx) }()
		synctest.Wait()
		select {
		case err := <-waited:
			t.Fatalf("a Durable returned before the append was durable: %v", err)
		default:
		}
		release()
		for range 2 {
			if err := <-waited; err != nil {
				t.Fatal(err)
			}
		}

		// A commit: ordered at once, durable at the sync.
		c := owner.Consumer{Name: "c"}
		res, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext})
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		store.meta.SetSyncGate(func(ctx context.Context) error { <-gate; return nil })
		d, err := o.OrderCommit(ctx, owner.CommitRequest{Consumer: c, Token: res.Token, Offset: 2})
		if err != nil {
			t.Fatal(err)
		}
		if p, err := o.Committed(ctx, c); err != nil || p.Committed.Offset != 2 {
			t.Fatalf("the owner's next step does not see the ordered commit: %+v %v", p, err)
		}
		// Ordered after it: a commit at or past it, not below.
		if _, err := o.OrderCommit(ctx, owner.CommitRequest{Consumer: c, Token: res.Token, Offset: 1}); err == nil {
			t.Fatal("a commit below an ordered one was accepted")
		}
		committed := make(chan error, 1)
		go func() { committed <- d.Wait(ctx) }()
		synctest.Wait()
		select {
		case err := <-committed:
			t.Fatalf("the commit's Durable returned before its sync: %v", err)
		default:
		}
		close(gate)
		if err := <-committed; err != nil {
			t.Fatal(err)
		}
		if v, ok, _ := store.meta.Restart().Get([]byte("bm/" + st.ID.String() + "/0/c/c")); !ok || string(v) != "2@1" {
			t.Fatalf("bookmark after a restart: %q %v", v, ok)
		}
	})
}

// The engine log's state is read from the engine only when the partition
// changed: an unchanged partition's state costs no allocation, and a
// change (an append, a purge) is seen at the next read.
func TestEngineLogStateFollowsChanges(t *testing.T) {
	ctx := context.Background()
	e, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "data", ReservedBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tp, err := e.CreateTopic("t", engine.TopicConfig{Partitions: 1, Durability: engine.DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	p, err := tp.Partition(0)
	if err != nil {
		t.Fatal(err)
	}
	l := owner.NewEngineLog(p)
	if st := l.State(); st.HighWatermark != 0 || st.History != 1 {
		t.Fatalf("new partition: %+v", st)
	}
	if a := testing.AllocsPerRun(100, func() { _ = l.State(); _ = l.Lineage() }); a != 0 {
		t.Errorf("reading an unchanged state allocates %v times", a)
	}
	_, last, err := l.Append(ownertest.Batch(t, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(ctx, last); err != nil {
		t.Fatal(err)
	}
	if st := l.State(); st.HighWatermark != 2 {
		t.Fatalf("after an append: %+v, want high watermark 2", st)
	}
	if _, err := l.Purge(); err != nil {
		t.Fatal(err)
	}
	st, lin := l.State(), l.Lineage()
	if st.History != 2 || st.LogStart != 2 || len(lin) != 2 || lin[1].Epoch != 2 || lin[1].Kind != fence.TransitionPurge {
		t.Fatalf("after a purge: %+v, lineage %+v", st, lin)
	}
}
