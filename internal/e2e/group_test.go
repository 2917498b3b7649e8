package e2e

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/sdk"
)

// A group end to end, over QUIC and the storage engine: three
// GroupConsumers share a topic's partitions while members join and leave;
// every record is processed, the hand-overs commit before they release,
// and once all have left the group's committed offsets cover the topic.
// A member's commit after it left is refused.
//

func TestGroupEndToEnd(t *testing.T) {
	ctx, dial := servedNode(t)
	admin := dial()
	if _, err := admin.CreateTopic(ctx, "orders", sdk.TopicConfig{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	p, err := admin.NewProducer(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	const total = 400
	for i := range total {
		if err := p.ProduceSync(ctx, &sdk.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	seen := map[string]int{}
	all := make(chan struct{})
	paused, othersJoined := make(chan struct{}), make(chan struct{})
	stop := make(chan struct{})
	run := func(name string, pauseAt, leaveAfter int) error {
		g, err := dial().NewGroupConsumer(ctx, "billing", []string{"orders"},
			sdk.WithGroupMaxWait(100*time.Millisecond), sdk.WithGroupMaxBytes(256))
		if err != nil {
			return err
		}
		got := 0
		for {
			select {
			case <-stop:
				return g.Close(ctx)
			default:
			}
			recs, err := g.Poll(ctx)
			if err != nil && !errors.Is(err, fence.ErrUnassignedPartition) {
				return fmt.Errorf("%s: %w", name, err)
			}
			mu.Lock()
			for _, r := range recs {
				seen[string(r.Value)]++
			}
			if len(seen) == total {
				select {
				case <-all:
				default:
					close(all)
				}
			}
			mu.Unlock()
			got += len(recs)
			if pauseAt > 0 && got >= pauseAt {
				pauseAt = 0
				close(paused)
				<-othersJoined
			}
			if leaveAfter > 0 && got >= leaveAfter {
				return g.Close(ctx)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() { errs <- run("a", 40, 0) })
	<-paused
	wg.Go(func() { errs <- run("b", 0, 0) })
	wg.Go(func() { errs <- run("c", 0, 20) })
	close(othersJoined)
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatal("not every record was processed")
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	d, err := admin.DescribeGroup(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	var committed uint64
	for _, o := range d.Offsets {
		if o.Lag != 0 || !o.Committed || o.Topic != "orders" {
			t.Errorf("after every member left: %+v", o)
		}
		committed += o.Offset
	}
	if committed != total || d.State != sdk.GroupEmpty {
		t.Fatalf("committed %d of %d, state %s", committed, total, d.State)
	}
	if l, err := admin.ListGroups(ctx); err != nil || len(l) != 1 || l[0].Name != "billing" {
		t.Fatalf("list: %+v %v", l, err)
	}

	// A member polls, leaves, and commits what it polled: refused.
	g, err := dial().NewGroupConsumer(ctx, "billing", []string{"orders"}, sdk.WithGroupMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p, err = admin.NewProducer(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte("late")}); err != nil {
		t.Fatal(err)
	}
	var recs []*sdk.Record
	for len(recs) == 0 {
		if recs, err = g.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(ctx, recs...); !errors.Is(err, sdk.ErrClosed) {
		t.Fatalf("commit after leaving: %v", err)
	}
}
