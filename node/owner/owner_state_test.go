package owner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// stateOwner is an owner over an in-memory log with a named consumer "a"
// that polled the given records.
func stateOwner(t *testing.T, values ...string) (*owner.Owner, *ownertest.Meta, *ownertest.Log, owner.PollResult) {
	t.Helper()
	ctx := context.Background()
	m := ownertest.NewMeta()
	l := ownertest.NewLog(m, "t/0")
	o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, l)
	if _, err := o.Produce(ctx, ownertest.Batch(t, values...)); err != nil {
		t.Fatal(err)
	}
	res, err := o.Poll(ctx, owner.PollRequest{Consumer: owner.Consumer{Name: "a"}, From: owner.FromNext})
	if err != nil {
		t.Fatal(err)
	}
	return o, m, l, res
}

func sput(k, v string) owner.StateChange { return owner.StateChange{Key: []byte(k), Value: []byte(v)} }
func sdel(k string) owner.StateChange    { return owner.StateChange{Key: []byte(k), Delete: true} }

// stateText renders a snapshot: "offset@history k=v ...".
// statePages loads c's state page by page from q, each page after the
// previous page's last key, and returns each page as stateText prints it.
func statePages(t *testing.T, o *owner.Owner, c owner.Consumer, q owner.StateQuery) []string {
	t.Helper()
	var pages []string
	for {
		s, err := o.LoadStateQuery(context.Background(), c, q)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, stateText(s))
		if !s.More {
			return pages
		}
		q.After = s.Entries[len(s.Entries)-1].Key
	}
}

func stateText(s owner.StateSnapshot) string {
	var b strings.Builder
	if s.HasCommitted {
		fmt.Fprintf(&b, "%d@%d", s.Committed.Offset, s.Committed.History)
	} else {
		b.WriteString("none")
	}
	for _, e := range s.Entries {
		fmt.Fprintf(&b, " %s=%s", e.Key, e.Value)
	}
	return b.String()
}

func loadText(t *testing.T, o *owner.Owner, c owner.Consumer) string {
	t.Helper()
	s, err := o.LoadState(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return stateText(s)
}

// Every limit refuses the commit with ErrStateLimit (an invalid
// argument), and nothing is written; a commit exactly at the limits is
// accepted.
//
// covers: G53
func TestStateLimits(t *testing.T) {
	ctx := context.Background()
	o, m, _, res := stateOwner(t, "x", "y")
	a := owner.Consumer{Name: "a"}
	big := func(n int) []byte { return bytes.Repeat([]byte{'v'}, n) }
	many := func(n int) []owner.StateChange {
		cs := make([]owner.StateChange, n)
		for i := range cs {
			cs[i] = sput(fmt.Sprintf("k%05d", i), "1")
		}
		return cs
	}
	over := []struct {
		name    string
		changes []owner.StateChange
	}{
		{"empty key", []owner.StateChange{{Value: []byte("v")}}},
		{"key too long", []owner.StateChange{{Key: big(owner.MaxStateKeySize + 1), Value: []byte("v")}}},
		{"value too large", []owner.StateChange{{Key: []byte("k"), Value: big(owner.MaxStateValueSize + 1)}}},
		{"too many changes", many(owner.MaxStateChanges + 1)},
		{"too many bytes", []owner.StateChange{
			{Key: []byte("a"), Value: big(owner.MaxStateValueSize)}, {Key: []byte("b"), Value: big(owner.MaxStateValueSize)},
			{Key: []byte("c"), Value: big(owner.MaxStateValueSize)}, {Key: []byte("d"), Value: big(owner.MaxStateValueSize)},
		}},
		{"delete with a value", []owner.StateChange{{Key: []byte("k"), Value: []byte("v"), Delete: true}}},
	}
	for _, c := range over {
		seq := m.Writes()
		err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 2}, c.changes)
		if !errors.Is(err, owner.ErrStateLimit) || !errors.Is(err, owner.ErrInvalidArgument) {
			t.Errorf("%s: %v, want a state limit error", c.name, err)
		}
		if m.Writes() != seq {
			t.Errorf("%s: refused commit wrote metadata", c.name)
		}
	}
	if got := loadText(t, o, a); got != "none" {
		t.Fatalf("after refused commits: %s", got)
	}
	atLimit := append(many(owner.MaxStateChanges-1), owner.StateChange{Key: big(owner.MaxStateKeySize), Value: big(owner.MaxStateValueSize)})
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 2}, atLimit); err != nil {
		t.Fatalf("a commit at the limits: %v", err)
	}
	s, err := o.LoadState(ctx, a, big(owner.MaxStateKeySize))
	if err != nil || len(s.Entries) != 1 || len(s.Entries[0].Value) != owner.MaxStateValueSize {
		t.Fatalf("the largest key: %d entries, %v", len(s.Entries), err)
	}
}

// A commit the fence refuses writes neither its offset nor any change:
// a token of an older history, a backwards commit, an offset the token
// did not deliver, a fenced session, a token of another consumer.
//
// covers: G50 G51
func TestRejectedStateCommitWritesNothing(t *testing.T) {
	ctx := context.Background()
	o, m, _, res := stateOwner(t, "x", "y", "z")
	a := owner.Consumer{Name: "a"}
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 2}, []owner.StateChange{sput("x", "1"), sput("y", "1")}); err != nil {
		t.Fatal(err)
	}
	before := loadText(t, o, a)
	if before != "2@1 x=1 y=1" {
		t.Fatalf("state %s", before)
	}
	other, err := o.Poll(ctx, owner.PollRequest{Consumer: owner.Consumer{Name: "b"}, From: owner.FromFirst})
	if err != nil {
		t.Fatal(err)
	}
	changes := []owner.StateChange{sput("x", "stale"), sdel("y"), sput("w", "stale")}
	cases := []struct {
		name string
		req  owner.CommitRequest
		want error
	}{
		{"backwards", owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 1}, fence.ErrCommitBackwards},
		{"not delivered", owner.CommitRequest{Consumer: a, Token: res.Token.Through(2), Offset: 3}, fence.ErrNotDelivered},
		{"another consumer's token", owner.CommitRequest{Consumer: a, Token: other.Token, Offset: 3}, fence.ErrTokenMismatch},
		{"no token", owner.CommitRequest{Consumer: a, Offset: 3}, fence.ErrTokenRequired},
	}
	for _, c := range cases {
		seq := m.Writes()
		if err := o.CommitState(ctx, c.req, changes); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if m.Writes() != seq {
			t.Errorf("%s: a refused commit wrote metadata", c.name)
		}
	}
	// A purge makes the token stale even though offset 3 is still a
	// number the partition has passed.
	if _, err := o.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	seq := m.Writes()
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 3}, changes); !errors.Is(err, fence.ErrStaleHistory) {
		t.Fatalf("stale history: %v", err)
	}
	if m.Writes() != seq {
		t.Fatal("a commit of a purged history wrote metadata")
	}
	if got := loadText(t, o, a); got != before {
		t.Fatalf("after refused commits: %s, want %s", got, before)
	}
}

// CommitState returns only once the offset and the state are durable; a
// restart finds both, or (before the sync) neither.
//
// covers: G55
func TestStateCommitIsDurableBeforeItReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		o, m, l, res := stateOwner(t, "x", "y")
		a := owner.Consumer{Name: "a"}
		release := make(chan struct{})
		m.SetSyncGate(func(ctx context.Context) error { <-release; return nil })
		done := make(chan error, 1)
		go func() {
			done <- o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 2}, []owner.StateChange{sput("x", "1"), sput("y", "1")})
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("state commit returned before its sync: %v", err)
		default:
		}
		// A crash now loses the commit whole: no bookmark, no state.
		lost := m.Restart()
		l2 := ownertest.NewLog(lost, "t/0")
		if _, ok, _ := l2.Bookmark("c/a"); ok {
			t.Fatal("an unsynced bookmark survived")
		}
		if err := l2.ScanState("c/a", nil, func(k, v []byte) error { return fmt.Errorf("unsynced key %s survived", k) }); err != nil {
			t.Fatal(err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		kept := m.Restart()
		o2 := ownertest.NewOwner(t, ownertest.ScenarioTopic, kept, l.Reopen(kept))
		if got := loadText(t, o2, a); got != "2@1 x=1 y=1" {
			t.Fatalf("after restart: %s", got)
		}
	})
}

// Loads: one key, a prefix, pages of a bounded size; the load checks the
// requester like a poll (a replaced session is refused), and an
// anonymous consumer has no state.
//
// covers: G52
func TestLoadState(t *testing.T) {
	ctx := context.Background()
	o, _, _, res := stateOwner(t, "x", "y")
	a := owner.Consumer{Name: "a"}
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 2},
		[]owner.StateChange{sput("k1", "1"), sput("k2", "22"), sput("j", "3"), sput("k3", "333"), sdel("j")}); err != nil {
		t.Fatal(err)
	}
	if s, err := o.LoadState(ctx, a, []byte("k2")); err != nil || stateText(s) != "2@1 k2=22" || s.Next != 2 {
		t.Fatalf("one key: %s next %d, %v", stateText(s), s.Next, err)
	}
	if s, err := o.LoadState(ctx, a, []byte("k")); err != nil || stateText(s) != "2@1" {
		t.Fatalf("a missing key: %s, %v", stateText(s), err)
	}
	if s, err := o.LoadStateQuery(ctx, a, owner.StateQuery{Prefix: []byte("k")}); err != nil || stateText(s) != "2@1 k1=1 k2=22 k3=333" {
		t.Fatalf("prefix: %s, %v", stateText(s), err)
	}
	if pages := statePages(t, o, a, owner.StateQuery{MaxBytes: 7}); fmt.Sprint(pages) != "[2@1 k1=1 k2=22 2@1 k3=333]" {
		t.Fatalf("pages %q", pages)
	}
	if _, err := o.LoadState(ctx, owner.Consumer{}, nil); !errors.Is(err, owner.ErrNoConsumer) {
		t.Fatalf("anonymous load: %v", err)
	}
	// A second process attaches under the name: the first may no longer
	// load.
	if _, err := o.SessionRegistry().Attach(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.LoadState(ctx, a, nil); !errors.Is(err, fence.ErrFencedSession) {
		t.Fatalf("replaced session loads: %v", err)
	}
	if got := loadText(t, o, owner.Consumer{Name: "a", Session: 1}); got != "2@1 k1=1 k2=22 k3=333" {
		t.Fatalf("current session loads %s", got)
	}
}

// Purge keeps the state with the history epoch it was derived in: a load
// shows the bookmark's older epoch beside the partition's new one and
// says the position moved; the next poll resumes at the new start; the
// consumer may clear or keep the state with its first commit in the new
// history, and a commit from the purged history stays refused.
//
// covers: G56
func TestStateAcrossPurge(t *testing.T) {
	ctx := context.Background()
	o, _, _, res := stateOwner(t, "x", "y", "x")
	a := owner.Consumer{Name: "a"}
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 3}, []owner.StateChange{sput("x", "2"), sput("y", "1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Produce(ctx, ownertest.Batch(t, "y")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := o.LoadState(ctx, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stateText(s) != "3@1 x=2 y=1" || s.State.History != 2 || !s.Resolved.Moved || s.Next != 4 {
		t.Fatalf("after purge: %s, partition history %d, moved %v, next %d", stateText(s), s.State.History, s.Resolved.Moved, s.Next)
	}
	if _, err := o.Produce(ctx, ownertest.Batch(t, "z")); err != nil {
		t.Fatal(err)
	}
	r, err := o.Poll(ctx, owner.PollRequest{Consumer: a, From: owner.FromOffset, Offset: s.Next})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: res.Token, Offset: 3}, nil); !errors.Is(err, fence.ErrStaleHistory) {
		t.Fatalf("a commit of the purged history: %v", err)
	}
	// The application resets its state in the new history: one commit
	// deletes the old keys and counts the new record.
	if err := o.CommitState(ctx, owner.CommitRequest{Consumer: a, Token: r.Token, Offset: r.Next}, []owner.StateChange{sdel("x"), sdel("y"), sput("z", "1")}); err != nil {
		t.Fatal(err)
	}
	if s, _ := o.LoadState(ctx, a, nil); stateText(s) != "5@2 z=1" || s.Resolved.Moved {
		t.Fatalf("after the first commit of the new history: %s moved %v", stateText(s), s.Resolved.Moved)
	}
}

// DeleteConsumer removes the group's offset and state in one write and
// forgets its progress; other groups keep theirs.
//
// covers: G54
func TestDeleteConsumerState(t *testing.T) {
	ctx := context.Background()
	m := ownertest.NewMeta()
	l := ownertest.NewLog(m, "t/0")
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: ownertest.ScenarioTopic, Log: l, Meta: m, Members: staticMembers{"g/m": 1, "h/m": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Produce(ctx, ownertest.Batch(t, "x", "y")); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g", "h"} {
		o.Assign(g, "m", 1)
		c := owner.Consumer{Name: g, Member: "m", MemberEpoch: 1}
		res, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromOffset, Offset: 0})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.CommitState(ctx, owner.CommitRequest{Consumer: c, Token: res.Token, Offset: res.Next}, []owner.StateChange{sput("x", "1"), sput("y", "1")}); err != nil {
			t.Fatal(err)
		}
	}
	o.Unassign("g")
	d, err := o.DeleteConsumer(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	gs, err := o.InspectState(ctx, "g", owner.StateQuery{})
	if err != nil || stateText(gs) != "none" {
		t.Fatalf("deleted group: %s, %v", stateText(gs), err)
	}
	if o.HasProgress("g") {
		t.Fatal("the owner kept the deleted group's progress")
	}
	hs, err := o.InspectState(ctx, "h", owner.StateQuery{})
	if err != nil || stateText(hs) != "2@1 x=1 y=1" || hs.Committed.Offset != 2 {
		t.Fatalf("other group: %s, %v", stateText(hs), err)
	}
	if o.HasProgress("") {
		t.Fatal("inspection created progress")
	}
	if _, err := o.DeleteConsumer(ctx, ""); !errors.Is(err, owner.ErrInvalidArgument) {
		t.Fatalf("deleting no group: %v", err)
	}
}
