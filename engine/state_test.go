package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// stateOf returns consumer's state on p as "k=v" in key order.
func stateOf(t *testing.T, p *Partition, consumer string, prefix string) string {
	t.Helper()
	var kv []string
	if err := p.ScanState(consumer, []byte(prefix), func(k, v []byte) error {
		kv = append(kv, string(k)+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(kv, " ")
}

func put(k, v string) StateChange { return StateChange{Key: []byte(k), Value: []byte(v)} }
func del(k string) StateChange    { return StateChange{Key: []byte(k), Delete: true} }

// TestCommitState: the bookmark and the changes are one write, applied in
// order; stores of consumers whose names share a prefix stay apart.
//
// covers: G50
func TestCommitState(t *testing.T) {
	e := mustOpen(t, testOptions(vfs.NewMem(), newFakeClock()))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{Partitions: 2})
	p, _ := top.Partition(0)
	p1, _ := top.Partition(1)
	seq1, err := p.CommitState("g/a", Bookmark{Offset: 3, History: 1}, []StateChange{put("x", "1"), put("y", "1"), put("x", "2"), put("z", "9"), del("z")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.CommitState("g/ab", Bookmark{Offset: 7, History: 1}, []StateChange{put("x", "other")}); err != nil {
		t.Fatal(err)
	}
	seq2, err := p.CommitState("g/a", Bookmark{Offset: 5, History: 1}, []StateChange{del("y"), put("w", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if seq2 <= seq1 {
		t.Fatalf("commit order %d after %d", seq2, seq1)
	}
	if got := stateOf(t, p, "g/a", ""); got != "w=1 x=2" {
		t.Fatalf("state of g/a: %q", got)
	}
	if got := stateOf(t, p, "g/ab", ""); got != "x=other" {
		t.Fatalf("state of g/ab: %q", got)
	}
	if got := stateOf(t, p, "g/a", "x"); got != "x=2" {
		t.Fatalf("prefix x: %q", got)
	}
	if got := stateOf(t, p1, "g/a", ""); got != "" {
		t.Fatalf("partition 1 has state %q", got)
	}
	if b, ok, err := p.Bookmark("g/a"); err != nil || !ok || b != (Bookmark{Offset: 5, History: 1}) {
		t.Fatalf("bookmark %+v %v %v", b, ok, err)
	}
	// A commit with no changes is a bookmark write.
	if _, err := p.CommitState("g/a", Bookmark{Offset: 6, History: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := p.Bookmark("g/a"); b.Offset != 6 || stateOf(t, p, "g/a", "") != "w=1 x=2" {
		t.Fatalf("after an empty commit: %+v %q", b, stateOf(t, p, "g/a", ""))
	}
	// Continuing a scan after a key.
	var after []string
	if err := p.ScanStateFrom("g/a", nil, []byte("w"), func(k, v []byte) error {
		after = append(after, string(k))
		return nil
	}); err != nil || fmt.Sprint(after) != "[x]" {
		t.Fatalf("scan after w: %v %v", after, err)
	}
}

// TestDeleteConsumerRemovesBookmarkAndState: one write removes the
// consumer's bookmark and every key of its store, and nothing of another
// consumer.
//
// covers: G54
func TestDeleteConsumerRemovesBookmarkAndState(t *testing.T) {
	e := mustOpen(t, testOptions(vfs.NewMem(), newFakeClock()))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{})
	p, _ := top.Partition(0)
	for _, c := range []string{"g/a", "g/ab", "g/"} {
		if _, err := p.CommitState(c, Bookmark{Offset: 1, History: 1}, []StateChange{put("k1", c), put("k2", c)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.DeleteConsumer("g/a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := p.Bookmark("g/a"); ok || stateOf(t, p, "g/a", "") != "" {
		t.Fatalf("g/a left: bookmark %v, state %q", ok, stateOf(t, p, "g/a", ""))
	}
	for _, c := range []string{"g/ab", "g/"} {
		if _, ok, _ := p.Bookmark(c); !ok || stateOf(t, p, c, "") != "k1="+c+" k2="+c {
			t.Fatalf("%s touched: %v %q", c, ok, stateOf(t, p, c, ""))
		}
	}
}

// TestStateRemovedWithTopic: deleting the topic removes every state key
// (the deletion's range covers the state space), later state writes and
// reads fail with ErrTopicDeleted, and a topic re-created under the name
// starts with no state, before and after a restart.
//
// covers: G54
func TestStateRemovedWithTopic(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs, newFakeClock())
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{})
	p, _ := top.Partition(0)
	seq, err := p.CommitState("g/a", Bookmark{Offset: 1, History: 1}, []StateChange{put("k", "v")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SyncMeta(context.Background(), seq); err != nil {
		t.Fatal(err)
	}
	id := top.ID()
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CommitState("g/a", Bookmark{Offset: 2, History: 1}, []StateChange{put("k", "w")}); !errors.Is(err, ErrTopicDeleted) {
		t.Fatalf("state commit on a deleted topic: %v", err)
	}
	if _, err := p.DeleteConsumer("g/a"); !errors.Is(err, ErrTopicDeleted) {
		t.Fatalf("consumer deletion on a deleted topic: %v", err)
	}
	if err := p.ScanState("g/a", nil, func(k, v []byte) error { return nil }); !errors.Is(err, ErrTopicDeleted) {
		t.Fatalf("state scan on a deleted topic: %v", err)
	}
	countKeys := func(e *Engine) int {
		lo := append([]byte{'S', scopePartition}, id[:]...)
		it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		return n
	}
	if n := countKeys(e); n != 0 {
		t.Fatalf("%d partition-space keys of the deleted topic left", n)
	}
	top2, err := e.CreateTopic("t", TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := top2.Partition(0)
	if got := stateOf(t, p2, "g/a", ""); got != "" {
		t.Fatalf("re-created topic sees state %q", got)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = e.Close()
	opts.FS = crashed
	e = mustOpen(t, opts)
	defer e.Close()
	if n := countKeys(e); n != 0 {
		t.Fatalf("after a power loss: %d partition-space keys of the deleted topic", n)
	}
	if top2, err = e.Topic("t"); err == nil {
		p2, _ = top2.Partition(0)
		if got := stateOf(t, p2, "g/a", ""); got != "" {
			t.Fatalf("re-created topic after a power loss sees state %q", got)
		}
	}
}

// TestStateSurvivesPowerLoss: synced state commits survive a power loss;
// an unsynced one is there entirely or not at all, never its bookmark
// without its state or the other way round.
//
// covers: G50 G55
func TestStateSurvivesPowerLoss(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs, newFakeClock())
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{})
	p, _ := top.Partition(0)
	var seq MetaSeq
	for i := 1; i <= 3; i++ {
		var err error
		seq, err = p.CommitState("g/a", Bookmark{Offset: uint64(i), History: 1}, []StateChange{put("n", fmt.Sprint(i)), put(fmt.Sprint("k", i), "x")})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := e.SyncMeta(context.Background(), seq); err != nil {
		t.Fatal(err)
	}
	// Not synced: the power loss may take it, but only whole.
	if _, err := p.CommitState("g/a", Bookmark{Offset: 4, History: 1}, []StateChange{put("n", "4"), del("k1")}); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = e.Close()
	opts.FS = crashed
	e = mustOpen(t, opts)
	defer e.Close()
	top, _ = e.Topic("t")
	p, _ = top.Partition(0)
	b, ok, err := p.Bookmark("g/a")
	if err != nil || !ok {
		t.Fatalf("bookmark after a power loss: %v %v", ok, err)
	}
	got := stateOf(t, p, "g/a", "")
	switch {
	case b.Offset == 3 && got == "k1=x k2=x k3=x n=3":
	case b.Offset == 4 && got == "k2=x k3=x n=4":
	default:
		t.Fatalf("bookmark %d with state %q", b.Offset, got)
	}
}

// The state store's keys are those of the partition's metadata space
// "state": the space a topic deletion removes.
func TestStateKeysAreInThePartitionSpace(t *testing.T) {
	e := mustOpen(t, testOptions(vfs.NewMem(), newFakeClock()))
	defer e.Close()
	top, _ := e.CreateTopic("t", TopicConfig{Partitions: 3})
	p, _ := top.Partition(2)
	want := p.Space(stateSpace).key(append([]byte{3}, "g/a"...))
	if got := p.stateBase("g/a", 0); string(got) != string(want) {
		t.Fatalf("state prefix %q, want %q", got, want)
	}
}
