package sdk_test

import (
	"context"
	"log"

	"github.com/ledgemq/ledge/sdk"
)

// A member of the group "billing" reading "orders" at least once: what a
// Poll returned is committed by the next Poll, by a revocation or by
// Close, each commit fenced by the token of the poll that returned the
// records.
func ExampleClient_NewGroupConsumer() {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, "") // beside a node's ledge-data: no flags needed
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	g, err := c.NewGroupConsumer(ctx, "billing", []string{"orders"},
		sdk.WithDelivery(sdk.AtLeastOnce),
		sdk.OnAssigned(func(_ context.Context, tps []sdk.TopicPartition) { log.Println("assigned", tps) }),
		sdk.OnRevoked(func(_ context.Context, tps []sdk.TopicPartition) { log.Println("revoked", tps) }),
		sdk.OnLost(func(_ context.Context, tps []sdk.TopicPartition) { log.Println("lost", tps) }),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(ctx)
	for range 100 {
		recs, err := g.Poll(ctx)
		if err != nil {
			log.Println(err) // some partitions may still have delivered
		}
		for _, r := range recs {
			log.Printf("%s/%d@%d: %s", r.Topic, r.Partition, r.Offset, r.Value)
		}
	}
}
