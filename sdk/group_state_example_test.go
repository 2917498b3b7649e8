package sdk_test

import (
	"context"
	"log"
	"strconv"

	"github.com/ledgemq/ledge/sdk"
)

// A member of the group "counter" counts the events of topic "events" per
// key, keeping the counts in the group's fenced state: when it receives a
// partition it loads the partition's counts with the offset they belong
// to, and it commits each poll's records together with the counts they
// changed, in one step. A rebalance, a crash or a member that lost its
// partition without knowing it never counts an event twice: the next
// holder resumes exactly where the state was committed, and a stale
// member's commit is refused before it writes anything.
func ExampleGroupConsumer_CommitState() {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, "") // beside a node's ledge-data: no flags needed
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

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
			log.Printf("%s/%d: %d keys counted up to offset %d", tp.Topic, tp.Partition, len(m), snap.Offset)
		}
	}
	forget := func(_ context.Context, tps []sdk.TopicPartition) {
		for _, tp := range tps {
			delete(counts, tp)
		}
	}
	g, err = c.NewGroupConsumer(ctx, "counter", []string{"events"},
		sdk.OnAssigned(load), sdk.OnRevoked(forget), sdk.OnLost(forget))
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(ctx)

	for range 100 {
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
			log.Println(err)
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
			m[string(r.Key)]++
			if changed[tp] == nil {
				changed[tp] = map[string]bool{}
			}
			changed[tp][string(r.Key)] = true
			last[tp] = r
		}
		// Commit each partition's offset with its changed counts.
		for tp, r := range last {
			var changes []sdk.StateChange
			for k := range changed[tp] {
				changes = append(changes, sdk.PutState([]byte(k), []byte(strconv.Itoa(counts[tp][k]))))
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
}
