package sdk_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// A member of the group "counter" counts the events of topic "events" by
// name, keeping the counts in the group's fenced state: when it receives
// a partition it loads the partition's counts with the offset they belong
// to, and it commits each poll's records together with the counts they
// changed, in one step. A rebalance, a crash or a member that lost its
// partition without knowing it never counts an event twice: the next
// holder resumes exactly where the state was committed, and a stale
// member's commit is refused before it writes anything.
//
// Here one process counts three events and stops; two more events
// arrive; the next process loads the counts of the first three and counts
// only the two new ones.
func ExampleGroupConsumer_CommitState() {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir)) // beside ./ledge-data: sdk.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	produce(ctx, c, "events", "door", "window", "door")
	countEvents(ctx, c)
	produceMore(ctx, c, "events", "door", "bell")
	countEvents(ctx, c)
	// Output:
	// loaded events/0: 0 names, reading from offset 0
	// counted events/0: map[door:2 window:1]
	// loaded events/0: 2 names, reading from offset 3
	// counted events/0: map[bell:1 door:3 window:1]
}

// countEvents is one process of the counter: it joins the group, counts
// what is there, and leaves. (A real member polls on until it is
// stopped.)
func countEvents(ctx context.Context, c *sdk.Client) {
	counts := map[sdk.TopicPartition]map[string]int{}
	var g *sdk.GroupConsumer
	load := func(ctx context.Context, tps []sdk.TopicPartition) {
		for _, tp := range tps {
			snap, err := g.LoadState(ctx, tp.Topic, tp.Partition)
			if err != nil {
				log.Println("load", tp, err) // lost already: Poll rejoins or skips it
				continue
			}
			m := map[string]int{}
			for _, e := range snap.Entries {
				n, _ := strconv.Atoi(string(e.Value))
				m[string(e.Key)] = n
			}
			counts[tp] = m
			fmt.Printf("loaded %s: %d names, reading from offset %d\n", tp, len(m), snap.Next)
		}
	}
	forget := func(_ context.Context, tps []sdk.TopicPartition) {
		for _, tp := range tps {
			delete(counts, tp)
		}
	}
	g, err := c.NewGroupConsumer(ctx, "counter", []string{"events"},
		sdk.WithGroupMaxWait(100*time.Millisecond), // a poll that finds nothing says so soon
		sdk.OnAssigned(load), sdk.OnRevoked(forget), sdk.OnLost(forget))
	if err != nil {
		log.Fatal(err)
	}

	for {
		// A partition whose state is not loaded (a load or a commit
		// failed) is loaded again: that also rewinds its reading to the
		// offset of the state.
		for _, tp := range g.Assignment() {
			if counts[tp] == nil {
				load(ctx, []sdk.TopicPartition{tp})
			}
		}
		recs, err := g.Poll(ctx)
		if err != nil {
			log.Println(err) // records first: they may have come with the error
		}
		if err == nil && len(recs) == 0 && len(counts) > 0 {
			break // caught up: this process stops here
		}
		// Count, per partition, and remember the last record of each.
		last := map[sdk.TopicPartition]*sdk.Record{}
		changed := map[sdk.TopicPartition]map[string]bool{}
		for _, r := range recs {
			tp := sdk.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			m := counts[tp]
			if m == nil {
				continue // not loaded: read again once it is
			}
			m[string(r.Value)]++
			if changed[tp] == nil {
				changed[tp] = map[string]bool{}
			}
			changed[tp][string(r.Value)] = true
			last[tp] = r
		}
		// Commit each partition's offset with its changed counts.
		for tp, r := range last {
			var changes []sdk.StateChange
			for name := range changed[tp] {
				changes = append(changes, sdk.PutState([]byte(name), []byte(strconv.Itoa(counts[tp][name]))))
			}
			if err := g.CommitState(ctx, r, changes); err != nil {
				// Refused: nothing was written. Drop the counts: they
				// are loaded again from the node, by this member if it
				// still holds the partition, or by its next holder.
				log.Println("commit", tp, err)
				delete(counts, tp)
			}
		}
	}
	for _, tp := range g.Assignment() {
		fmt.Printf("counted %s: %v\n", tp, counts[tp])
	}
	// Close gives the partitions up: the next member loads their state.
	if err := g.Close(ctx); err != nil {
		log.Fatal(err)
	}
}
