package sdk_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ledgemq/ledge/sdk"
)

// Commands to one device: every device polls the shared commands topic
// for its own key, and the node answers each poll with that key's
// records alone, waking no other device's poll.
func ExampleWithKey() {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "device-commands", sdk.TopicConfig{Partitions: 1}); err != nil {
		log.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "device-commands")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	for _, cmd := range [][2]string{{"pump-7", "open valve"}, {"pump-8", "reboot"}, {"pump-7", "close valve"}} {
		if err := p.ProduceSync(ctx, &sdk.Record{Key: []byte(cmd[0]), Value: []byte(cmd[1])}); err != nil {
			log.Fatal(err)
		}
	}

	cons, err := c.NewConsumer(ctx, "device-commands", sdk.WithConsumerName("pump-7"), sdk.WithKey([]byte("pump-7")))
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)
	recs, err := cons.Poll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Printf("@%d %s: %s\n", r.Offset, r.Key, r.Value)
	}
	// Output:
	// @0 pump-7: open valve
	// @2 pump-7: close valve
}
