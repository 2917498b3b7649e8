package engine_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/record"
)

func Example() {
	e, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "data", ReservedBytes: -1})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	topic, _ := e.CreateTopic("sensors", engine.TopicConfig{Partitions: 1, Durability: engine.DurabilityAlways})
	p, _ := topic.Partition(0)

	var b record.BatchBuilder
	b.Append(record.Record{Key: []byte("t1"), Value: []byte("21.5")})
	b.Append(record.Record{Key: []byte("t2"), Value: []byte("19.0")})
	batch, _ := b.Build(record.CompressionZstd)

	ctx := context.Background()
	res, _ := p.Append(batch) // the batch now belongs to the engine
	if err := p.WaitDurable(ctx, res.Last); err != nil {
		panic(err)
	}

	plan, _ := p.PlanRead(0, 1<<20) // on the owner
	read, _ := plan.Execute(ctx)    // anywhere
	plan.Release()
	for _, stored := range read.Batches {
		it, _ := record.NewRecordIterator(stored, 0)
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			fmt.Printf("%d %s=%s\n", r.Offset, r.Key, r.Value)
		}
	}
	fmt.Println("next", read.Next, "history", p.State().History)
	// Output:
	// 0 t1=21.5
	// 1 t2=19.0
	// next 2 history 1
}
