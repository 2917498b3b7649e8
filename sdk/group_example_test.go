package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/ledgemq/ledge/sdk"
)

// A member of the group "shipping" reading "parcels" at least once: what
// a Poll returned is committed by the next Poll, by a revocation or by
// Close, each commit fenced by the token of the poll that returned the
// records. WithGroupMaxMessages(2) makes the polls small: each record
// here is a batch of its own, so a poll stops at two. Committed shows
// where the group resumes.
func ExampleClient_NewGroupConsumer() {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir)) // beside ./ledge-data: sdk.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	produce(ctx, c, "parcels", "p1", "p2", "p3")

	g, err := c.NewGroupConsumer(ctx, "shipping", []string{"parcels"},
		sdk.WithDelivery(sdk.AtLeastOnce),
		sdk.WithGroupMaxMessages(2),
		sdk.OnAssigned(func(_ context.Context, tps []sdk.TopicPartition) { fmt.Println("assigned", tps) }),
		sdk.OnRevoked(func(_ context.Context, tps []sdk.TopicPartition) { fmt.Println("revoked", tps) }),
		sdk.OnLost(func(_ context.Context, tps []sdk.TopicPartition) { fmt.Println("lost", tps) }),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(ctx)
	for read := 0; read < 3; {
		recs, err := g.Poll(ctx)
		if len(recs) > 0 { // records first: some partitions may have delivered
			var got []string
			for _, r := range recs {
				got = append(got, fmt.Sprintf("%s/%d@%d %s", r.Topic, r.Partition, r.Offset, r.Value))
			}
			fmt.Printf("a poll of %d: %s\n", len(recs), strings.Join(got, ", "))
		}
		read += len(recs)
		switch {
		case errors.Is(err, sdk.ErrUnknownMember), errors.Is(err, sdk.ErrFencedMember):
			// The member was fenced: its partitions were lost (OnLost);
			// the next Poll rejoins.
		case err != nil:
			log.Fatal(err)
		}
	}
	if err := g.CommitPolled(ctx); err != nil {
		log.Fatal(err)
	}
	committed, err := g.Committed(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, x := range committed {
		fmt.Printf("the group resumes %s/%d at %d\n", x.Topic, x.Partition, x.Offset)
	}
	// Output:
	// assigned [parcels/0]
	// a poll of 2: parcels/0@0 p1, parcels/0@1 p2
	// a poll of 1: parcels/0@2 p3
	// the group resumes parcels/0 at 3
	// revoked [parcels/0]
}
