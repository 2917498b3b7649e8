package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/sdk"
)

// stateCounter is a group member that counts events per key in the
// group's fenced state, as sdk's example does.
type stateCounter struct {
	g      *sdk.GroupConsumer
	counts map[sdk.TopicPartition]map[string]int
	// committed is signalled after each accepted commit; n counts them.
	committed chan<- struct{}
	n         int
}

func (c *stateCounter) load(ctx context.Context, tps []sdk.TopicPartition) error {
	for _, tp := range tps {
		snap, err := c.g.LoadState(ctx, tp.Topic, tp.Partition)
		if err != nil {
			return err
		}
		m := map[string]int{}
		for _, e := range snap.Entries {
			n, err := strconv.Atoi(string(e.Value))
			if err != nil {
				return err
			}
			m[string(e.Key)] = n
		}
		c.counts[tp] = m
	}
	return nil
}

// step loads what is not loaded, polls once, and commits each
// partition's records with the counts they changed.
func (c *stateCounter) step(ctx context.Context) error {
	for _, tp := range c.g.Assignment() {
		if c.counts[tp] == nil {
			if err := c.load(ctx, []sdk.TopicPartition{tp}); err != nil && !errors.Is(err, sdk.ErrNotAssigned) {
				return err
			}
		}
	}
	recs, err := c.g.Poll(ctx)
	if err != nil && !errors.Is(err, fence.ErrUnassignedPartition) {
		return err
	}
	last := map[sdk.TopicPartition]*sdk.Record{}
	changed := map[sdk.TopicPartition]map[string]bool{}
	for _, r := range recs {
		tp := sdk.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		m := c.counts[tp]
		if m == nil {
			continue
		}
		m[string(r.Key)]++
		if changed[tp] == nil {
			changed[tp] = map[string]bool{}
		}
		changed[tp][string(r.Key)] = true
		last[tp] = r
	}
	for tp, r := range last {
		var changes []sdk.StateChange
		for k := range changed[tp] {
			changes = append(changes, sdk.PutState([]byte(k), []byte(strconv.Itoa(c.counts[tp][k]))))
		}
		if err := c.g.CommitState(ctx, r, changes); err != nil {
			delete(c.counts, tp)
			continue
		}
		c.n++
		select {
		case c.committed <- struct{}{}:
		default: // one signal pending is enough
		}
	}
	return nil
}

// End to end over QUIC and the storage engine: two members count events
// per key in the group's state while the partitions are rebalanced
// between them; every event is counted exactly once, and the state an
// administrator reads is the fold of the topic.
//
// covers: G51 G52
func TestE2EStateCountsOnceAcrossRebalances(t *testing.T) {
	ctx, dial := servedNode(t)
	admin := dial()
	if _, err := admin.CreateTopic(ctx, "events", sdk.TopicConfig{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	p, err := admin.NewProducer(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	const total = 300
	want := map[string]string{}
	hw := map[int32]uint64{}
	for i := range total {
		key := fmt.Sprint("k", i%7)
		r := &sdk.Record{Key: []byte(key), Value: []byte(fmt.Sprint(i))}
		if err := p.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
		hw[r.Partition] = max(hw[r.Partition], r.Offset+1)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range total {
		k := fmt.Sprint("k", i%7)
		nb, _ := strconv.Atoi(want[k])
		want[k] = strconv.Itoa(nb + 1)
	}

	commits := make(chan struct{}, 1)
	newCounter := func() *stateCounter {
		c := &stateCounter{counts: map[sdk.TopicPartition]map[string]int{}, committed: commits}
		forget := func(_ context.Context, tps []sdk.TopicPartition) {
			for _, tp := range tps {
				delete(c.counts, tp)
			}
		}
		g, err := dial().NewGroupConsumer(ctx, "counter", []string{"events"},
			sdk.WithGroupMaxWait(50*time.Millisecond), sdk.WithGroupMaxBytes(512),
			sdk.OnRevoked(forget), sdk.OnLost(forget))
		if err != nil {
			t.Fatal(err)
		}
		c.g = g
		return c
	}

	// A counts alone for a while; then B joins and they share the
	// partitions; then A leaves and B finishes.
	a := newCounter()
	for range 5 {
		if err := a.step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	stopB := make(chan struct{})
	errB := make(chan error, 1)
	b := newCounter()
	wg.Go(func() {
		for {
			select {
			case <-stopB:
				errB <- b.g.Close(ctx)
				return
			default:
			}
			if err := b.step(ctx); err != nil {
				errB <- err
				return
			}
		}
	})
	for range 10 {
		if err := a.step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Wait until every partition's state covers its whole log.
	reached := map[int32]uint64{}
	for {
		done := true
		for part, end := range hw {
			s, err := admin.InspectState(ctx, "counter", "events", part, nil)
			if err != nil {
				t.Fatal(err)
			}
			reached[part] = s.Offset
			if s.Offset < end {
				done = false
			}
		}
		if done {
			break
		}
		select {
		case <-commits:
		case err := <-errB:
			t.Fatalf("B: %v", err)
		case <-ctx.Done():
			t.Fatalf("the state reached %v of %v", reached, hw)
		}
	}
	close(stopB)
	wg.Wait()
	if err := <-errB; err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for part := range hw {
		s, err := admin.InspectState(ctx, "counter", "events", part, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range s.Entries {
			if _, dup := got[string(e.Key)]; dup {
				t.Fatalf("key %s counted on two partitions", e.Key)
			}
			got[string(e.Key)] = string(e.Value)
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("final counts %v, want %v", got, want)
	}
	if a.n == 0 || b.n == 0 {
		t.Fatalf("commits: A %d, B %d; want both to have counted", a.n, b.n)
	}
	// One key through the inspection.
	s, err := admin.InspectState(ctx, "counter", "events", 0, []byte("k0"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Entries) > 1 {
		t.Fatalf("one key: %d entries", len(s.Entries))
	}
}
