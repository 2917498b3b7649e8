package node

import (
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// BenchmarkServerProduceOneAtATime: one record of 1 KiB per request, one
// request in flight, durability none: the path of a one-at-a-time
// producer, whose latency tail the collector's work per request feeds.
func BenchmarkServerProduceOneAtATime(b *testing.B) {
	tn := startNode(b, nil, nil)
	c := tn.mustDial(b, tn.admin)
	c.createTopic("t", wire.TopicConfig{Durability: wire.DurabilityNone})
	bt := batch(b, 0, 0, 0, benchValues(1, 1024)...)
	p := c.stream()
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	for b.Loop() {
		if err := await(b, c.send(p, &wire.ProduceRequest{Topic: "t", Batch: bt}), &wire.ProduceReply{}); err != nil {
			b.Fatal(err)
		}
	}
}
