package e2e

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// dayGroup is a consumer group whose members count the records of a topic
// per key in the group's fenced state, committing each poll's offsets
// with the counts it changed (the exact fold the node must keep).
type dayGroup struct {
	name, topic     string
	folded, commits atomic.Int64

	mu sync.Mutex
	// committed is, per partition, the highest offset a CommitState
	// acknowledged: the node's committed offset is never below it.
	committed map[int32]uint64
}

func (g *dayGroup) member(ctx context.Context, t *testing.T, c *sdk.Client, id string) {
	counts := map[int32]map[string]int{}
	var gc *sdk.GroupConsumer
	load := func(ctx context.Context, tps []sdk.TopicPartition) {
		for _, tp := range tps {
			snap, err := gc.LoadState(ctx, tp.Topic, tp.Partition)
			if err != nil {
				continue // lost already, or the node is restarting: loaded again below
			}
			m := map[string]int{}
			for _, e := range snap.Entries {
				n, _ := strconv.Atoi(string(e.Value))
				m[string(e.Key)] = n
			}
			counts[tp.Partition] = m
		}
	}
	forget := func(_ context.Context, tps []sdk.TopicPartition) {
		for _, tp := range tps {
			delete(counts, tp.Partition)
		}
	}
	var err error
	gc, err = c.NewGroupConsumer(ctx, g.name, []string{g.topic}, sdk.WithMemberID(id),
		sdk.WithGroupMaxWait(300*time.Millisecond), sdk.OnAssigned(load), sdk.OnRevoked(forget), sdk.OnLost(forget))
	if err != nil {
		t.Errorf("%s: joining: %v", id, err)
		return
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), safety)
		defer cancel()
		_ = gc.Close(closeCtx)
	}()
	for ctx.Err() == nil {
		for _, tp := range gc.Assignment() {
			if counts[tp.Partition] == nil {
				load(ctx, []sdk.TopicPartition{tp})
			}
		}
		recs, err := gc.Poll(ctx)
		if err != nil && len(recs) == 0 {
			time.Sleep(20 * time.Millisecond) // a restart: the member rejoins by itself
			continue
		}
		last := map[int32]*sdk.Record{}
		changed := map[int32]map[string]bool{}
		n := map[int32]int64{}
		for _, r := range recs {
			m := counts[r.Partition]
			if m == nil {
				continue // not loaded: read again once it is
			}
			m[string(r.Key)]++
			n[r.Partition]++
			if changed[r.Partition] == nil {
				changed[r.Partition] = map[string]bool{}
			}
			changed[r.Partition][string(r.Key)] = true
			last[r.Partition] = r
		}
		for p, r := range last {
			var changes []sdk.StateChange
			for k := range changed[p] {
				changes = append(changes, sdk.PutState([]byte(k), []byte(strconv.Itoa(counts[p][k]))))
			}
			if err := gc.CommitState(ctx, r, changes); err != nil {
				delete(counts, p) // nothing was written: load again
				continue
			}
			g.commits.Add(1)
			g.folded.Add(n[p])
			g.mu.Lock()
			g.committed[p] = max(g.committed[p], r.Offset+1)
			g.mu.Unlock()
		}
	}
}

// checkOffsets compares the group's committed offsets with the commits
// acknowledged before it asked: none may be behind.
func (g *dayGroup) checkOffsets(ctx context.Context, t *testing.T, c *sdk.Client) {
	t.Helper()
	g.mu.Lock()
	acked := maps.Clone(g.committed)
	g.mu.Unlock()
	var desc sdk.GroupDescription
	var err error
	for range 50 { // the node may have just restarted
		if desc, err = c.DescribeGroup(ctx, g.name); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("describing group %s: %v", g.name, err)
		return
	}
	for _, o := range desc.Offsets {
		if want := acked[o.Partition]; o.Topic == g.topic && want > 0 && (!o.Committed || o.Offset < want) {
			t.Errorf("group %s, partition %d: committed offset %d (committed %v) is behind an acknowledged commit of %d",
				g.name, o.Partition, o.Offset, o.Committed, want)
		}
	}
}

// checkFold compares each partition's state with the count per key of
// the partition's records below the state's offset, read from the log.
func (g *dayGroup) checkFold(ctx context.Context, t *testing.T, c *sdk.Client) {
	t.Helper()
	all := readAll(ctx, t, c, g.topic)
	for p := range int32(3) {
		snap, err := c.InspectState(ctx, g.name, g.topic, p, nil)
		if err != nil {
			t.Errorf("state of %s/%d: %v", g.topic, p, err)
			continue
		}
		want := map[string]int{}
		for _, r := range all {
			if r.Partition == p && r.Offset < snap.Offset {
				want[string(r.Key)]++
			}
		}
		got := map[string]int{}
		for _, e := range snap.Entries {
			got[string(e.Key)], _ = strconv.Atoi(string(e.Value))
		}
		if !maps.Equal(got, want) {
			t.Errorf("state of %s/%d at offset %d: %v, the fold of the log says %v", g.topic, p, snap.Offset, got, want)
		}
	}
	if g.folded.Load() == 0 {
		t.Error("the group folded nothing")
	}
}

// dayFollower is a named consumer following a topic, committing what each
// poll returned at the next (at least once).
type dayFollower struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (f *dayFollower) run(ctx context.Context, t *testing.T, c *sdk.Client, topic string) {
	cons, err := c.NewConsumer(ctx, topic, sdk.WithConsumerName("follower"), sdk.WithStart(sdk.AtFirst()),
		sdk.WithAutoCommit(sdk.AutoCommitOnNextPoll), sdk.WithMaxWait(300*time.Millisecond))
	if err != nil {
		t.Errorf("follower: %v", err)
		return
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), safety)
		defer cancel()
		_ = cons.Close(closeCtx)
	}()
	f.follow(ctx, cons, false)
}

// follow polls until ctx ends, or with untilEnd until a poll finds
// nothing.
func (f *dayFollower) follow(ctx context.Context, cons *sdk.Consumer, untilEnd bool) {
	for ctx.Err() == nil {
		recs, err := cons.Poll(ctx)
		if err != nil && len(recs) == 0 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		f.mu.Lock()
		for _, r := range recs {
			f.seen[string(r.Value)] = true
		}
		f.mu.Unlock()
		if untilEnd && len(recs) == 0 && err == nil {
			return
		}
	}
}

// check resumes the follower from its committed position to the end and
// finds every acknowledged record of p among what it saw.
func (f *dayFollower) check(ctx context.Context, t *testing.T, c *sdk.Client, p *dayProducer) {
	t.Helper()
	cons, err := c.NewConsumer(ctx, p.topic, sdk.WithConsumerName("follower"), sdk.WithStart(sdk.AtCommitted()),
		sdk.WithAutoCommit(sdk.AutoCommitOnNextPoll), sdk.WithMaxWait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	f.follow(ctx, cons, true)
	p.mu.Lock()
	defer p.mu.Unlock()
	missed := 0
	for v := range p.acked {
		if !f.seen[v] {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("the follower never saw %d of the %d acknowledged records of %s", missed, len(p.acked), p.topic)
	}
}
