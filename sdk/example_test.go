package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// Beside a node started with `ledge serve`, sdk.Dial(ctx, "") finds it on
// 127.0.0.1:7420 and its CA and admin token in ./ledge-data. Elsewhere,
// name the address and the two files, copied from the node's data
// directory (FindDataDirFiles says where they are in it). This example
// dials the node `go test` starts that way; for a remote node the call is
// the same with its address and the copies:
//
//	sdk.Dial(ctx, "edge-7.example.net:7420",
//		sdk.WithCAFile("/etc/ledge/ca.pem"),
//		sdk.WithTokenFile("/etc/ledge/token"))
func ExampleDial() {
	ctx := context.Background()
	files, err := sdk.FindDataDirFiles(nodeDataDir)
	if err != nil {
		log.Fatal(err)
	}
	c, err := sdk.Dial(ctx, nodeAddr, // "edge-7.example.net:7420"
		sdk.WithCAFile(files.CA),            // "/etc/ledge/ca.pem"
		sdk.WithTokenFile(files.AdminToken), // "/etc/ledge/token"
		sdk.WithRequestTimeout(10*time.Second),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "telemetry", sdk.TopicConfig{
		Partitions:   4,
		Durability:   sdk.DurabilityAlways,
		Compression:  sdk.CompressionZstd,
		RetentionAge: 7 * 24 * time.Hour,
	}); err != nil && !errors.Is(err, sdk.ErrTopicExists) {
		log.Fatal(err)
	}
	d, err := c.DescribeTopic(ctx, "telemetry")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d partitions, durability %s, compression %s, records kept %s\n",
		d.Name, len(d.Partitions), d.Config.Durability, d.Config.Compression, d.Config.RetentionAge)
	// Output:
	// telemetry: 4 partitions, durability always, compression zstd, records kept 168h0m0s
}

// Produce is asynchronous: the callback gets each record's offset, or its
// error. Records of one partition are acknowledged in order, and retries
// never duplicate them.
func ExampleProducer_Produce() {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir)) // beside ./ledge-data: sdk.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "sensors", sdk.TopicConfig{Partitions: 4}); err != nil {
		log.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "sensors", sdk.WithLinger(5*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	var (
		mu           sync.Mutex // callbacks run on the producer's goroutines
		perPartition [4]int
		next         = map[string]uint64{} // each sensor's next offset at least
		outOfOrder   int
	)
	for i := range 1000 {
		rec := &sdk.Record{
			Key:     []byte(fmt.Sprintf("sensor-%d", i%16)), // one sensor, one partition, in order
			Value:   []byte(fmt.Sprintf(`{"celsius": %d}`, 20+i%5)),
			Headers: []sdk.Header{{Key: "unit", Value: []byte("C")}},
		}
		p.Produce(ctx, rec, func(r *sdk.Record, err error) {
			if err != nil {
				log.Printf("record %s failed: %v", r.Key, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			perPartition[r.Partition]++
			if r.Offset < next[string(r.Key)] {
				outOfOrder++
			}
			next[string(r.Key)] = r.Offset + 1
		})
	}
	// Close flushes: it returns once every record is acknowledged.
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("records per partition:", perPartition)
	fmt.Println("acknowledged out of order:", outOfOrder)
	// Output:
	// records per partition: [312 188 188 312]
	// acknowledged out of order: 0
}

// ProduceSync waits for the acknowledgement and fills in the offset.
func ExampleProducer_ProduceSync() {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir)) // beside ./ledge-data: sdk.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "orders", sdk.TopicConfig{Partitions: 1}); err != nil {
		log.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	for _, v := range []string{"paid", "shipped"} {
		rec := &sdk.Record{Key: []byte("order-1"), Value: []byte(v)}
		if err := p.ProduceSync(ctx, rec); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s written at %s/%d@%d\n", rec.Value, rec.Topic, rec.Partition, rec.Offset)
	}
	// Output:
	// paid written at orders/0@0
	// shipped written at orders/0@1
}

// A named consumer resumes from its committed position. Commit carries
// the fence token of the poll that returned the records: after a purge,
// or once another process took over the name, the node refuses it.
func ExampleConsumer_Commit() {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	produce(ctx, c, "invoices", "a", "b", "c")

	// Reads two records, commits them, and stops.
	read := func(max int) {
		cons, err := c.NewConsumer(ctx, "invoices", sdk.WithConsumerName("billing"),
			sdk.WithMaxMessages(max), sdk.WithMaxWait(0))
		if err != nil {
			log.Fatal(err)
		}
		defer cons.Close(ctx)
		recs, err := cons.Poll(ctx)
		for _, r := range recs { // records and an error may come together: records first
			fmt.Printf("%s/%d@%d %s\n", r.Topic, r.Partition, r.Offset, r.Value)
		}
		if err != nil {
			log.Fatal(err)
		}
		switch err := cons.Commit(ctx, recs...); {
		case errors.Is(err, sdk.ErrFencedSession):
			log.Fatal("another process consumes as billing now")
		case errors.Is(err, sdk.ErrStaleHistory):
			// The partition was purged: drop what was held; the next poll
			// resumes at its new start.
		case err != nil:
			log.Fatal(err)
		}
	}
	read(2)
	fmt.Println("-- a new process under the same name resumes after the commit:")
	read(10)
	// Output:
	// invoices/0@0 a
	// invoices/0@1 b
	// -- a new process under the same name resumes after the commit:
	// invoices/0@2 c
}

// An anonymous consumer reads by position, from a time, an offset, the
// first record or only new ones.
func ExampleConsumer_Poll() {
	ctx := context.Background()
	c, err := sdk.Dial(ctx, nodeAddr, sdk.WithDataDir(nodeDataDir))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	produce(ctx, c, "readings", "20.5", "21.0", "21.5")

	cons, err := c.NewConsumer(ctx, "readings",
		sdk.WithStart(sdk.AtTime(time.Now().Add(-time.Hour))),
		sdk.WithMaxWait(0), // answer at once: read what is there
	)
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)
	for {
		recs, err := cons.Poll(ctx)
		for _, r := range recs {
			fmt.Printf("%d %s\n", r.Offset, r.Value)
		}
		if err != nil {
			log.Fatal(err)
		}
		if len(recs) == 0 {
			return // caught up
		}
		sdk.Recycle(recs) // done with them: the next polls reuse their memory
	}
	// Output:
	// 0 20.5
	// 1 21.0
	// 2 21.5
}

// produce creates a topic of one partition holding values.
func produce(ctx context.Context, c *sdk.Client, topic string, values ...string) {
	if _, err := c.CreateTopic(ctx, topic, sdk.TopicConfig{Partitions: 1}); err != nil {
		log.Fatal(err)
	}
	produceMore(ctx, c, topic, values...)
}

// produceMore appends values to a topic, one record at a time: each is
// a batch of its own.
func produceMore(ctx context.Context, c *sdk.Client, topic string, values ...string) {
	p, err := c.NewProducer(ctx, topic)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	for _, v := range values {
		if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte(v)}); err != nil {
			log.Fatal(err)
		}
	}
}
