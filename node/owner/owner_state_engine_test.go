package owner_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// engineStateOwner builds an owner of the engine backend's partition, with
// sessions and producers of its metadata.
func engineStateOwner(t *testing.T, b *engineBackend) *owner.Owner {
	t.Helper()
	m := b.meta()
	sess, err := owner.OpenSessions(m)
	if err != nil {
		t.Fatal(err)
	}
	prods, err := owner.OpenProducers(m)
	if err != nil {
		t.Fatal(err)
	}
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: b.topic(), Log: b.log(), Meta: m, Sessions: sess, Producers: prods})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// On the storage engine, an acknowledged state commit survives a power
// loss together with its offset; a consumer that loads after the restart
// resumes exactly there, and deleting the group's progress is durable too.
//
// covers: G55 G54
func TestStateSurvivesRestartOnEngine(t *testing.T) {
	ctx := context.Background()
	b := newEngineBackend(t).(*engineBackend)
	defer func() { b.close() }()
	o := engineStateOwner(t, b)
	if _, err := o.Produce(ctx, ownertest.Batch(t, "x", "y", "x")); err != nil {
		t.Fatal(err)
	}
	a := owner.Consumer{Name: "a"}
	res, err := o.Poll(ctx, owner.PollRequest{Consumer: a, From: owner.FromNext})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 3}, []owner.StateChange{sput("x", "2"), sput("y", "1")}); err != nil {
		t.Fatal(err)
	}
	b.restart(t)
	o = engineStateOwner(t, b)
	if got := loadText(t, o, a); got != "3@1 x=2 y=1" {
		t.Fatalf("after a power loss: %s", got)
	}
	s, _ := o.LoadState(ctx, a, nil)
	if s.Next != 3 {
		t.Fatalf("resumes at %d, want 3", s.Next)
	}
	// In pages: the engine seeks past the previous page's last key.
	if pages := statePages(t, o, a, owner.StateQuery{MaxBytes: 2}); fmt.Sprint(pages) != "[3@1 x=2 3@1 y=1]" {
		t.Fatalf("pages %q", pages)
	}

	// A group's state, then its deletion: gone after a power loss too.
	o.Assign("g", "m", 1)
	g := owner.Consumer{Name: "g", Member: "m", MemberEpoch: 1}
	o.SetMembers(staticMembers{"g/m": 1})
	gr, err := o.Poll(ctx, owner.PollRequest{Consumer: g, From: owner.FromFirst})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: g, Token: gr.Token, Offset: 3}, []owner.StateChange{sput("k", "v")}); err != nil {
		t.Fatal(err)
	}
	d, err := o.DeleteConsumer(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	b.restart(t)
	o = engineStateOwner(t, b)
	if s, err := o.InspectState(ctx, "g", owner.StateQuery{}); err != nil || stateText(s) != "none" {
		t.Fatalf("deleted group after a power loss: %s, %v", stateText(s), err)
	}
	if got := loadText(t, o, a); got != "3@1 x=2 y=1" {
		t.Fatalf("the named consumer's state after the group's deletion: %s", got)
	}
}

// staticMembers knows fixed members at fixed epochs ("group/member").
type staticMembers map[string]uint64

func (m staticMembers) Member(group, member string) (bool, fence.MemberEpoch) {
	e, ok := m[group+"/"+member]
	return ok, fence.MemberEpoch(e)
}

// Once the topic is deleted, state commits and loads fail with the
// topic's deletion, and the engine removed the state with the topic.
//
// covers: G54
func TestStateOfDeletedTopicOnEngine(t *testing.T) {
	ctx := context.Background()
	b := newEngineBackend(t).(*engineBackend)
	defer func() { b.close() }()
	o := engineStateOwner(t, b)
	if _, err := o.Produce(ctx, ownertest.Batch(t, "x")); err != nil {
		t.Fatal(err)
	}
	a := owner.Consumer{Name: "a"}
	res, err := o.Poll(ctx, owner.PollRequest{Consumer: a, From: owner.FromNext})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 1}, []owner.StateChange{sput("x", "1")}); err != nil {
		t.Fatal(err)
	}
	if err := b.e.DeleteTopic(engineTopic); err != nil {
		t.Fatal(err)
	}
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 1}, []owner.StateChange{sput("x", "2")}); !errors.Is(err, engine.ErrTopicDeleted) {
		t.Fatalf("state commit after the deletion: %v", err)
	}
	if _, err := o.LoadState(ctx, a, nil); !errors.Is(err, engine.ErrTopicDeleted) {
		t.Fatalf("state load after the deletion: %v", err)
	}
}
