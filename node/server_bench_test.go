package node

import (
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// The server path of produce and poll through a real QUIC connection and
// the engine, with the test client on the other end. allocs/op and B/op
// (client and node together) are the figures a loaded machine does not
// distort.

// benchValues are n values of size bytes.
func benchValues(n, size int) []string {
	v := make([]string, n)
	for i := range v {
		v[i] = strings.Repeat(string(rune('a'+i%26)), size)
	}
	return v
}

// BenchmarkServerProduce: batches of 100 records of 1 KiB, five in flight
// on one stream, on a topic with durability none.
func BenchmarkServerProduce(b *testing.B) {
	tn := startNode(b, nil, nil)
	c := tn.mustDial(b, tn.admin)
	c.createTopic("t", wire.TopicConfig{Durability: wire.DurabilityNone})
	bt := batch(b, 0, 0, 0, benchValues(100, 1024)...)
	p := c.stream()
	const depth = 5
	pending := make(chan (<-chan reply), depth)
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if len(pending) == depth {
			if err := await(b, <-pending, &wire.ProduceReply{}); err != nil {
				b.Fatal(err)
			}
		}
		pending <- c.send(p, &wire.ProduceRequest{Topic: "t", Batch: append([]byte(nil), bt...)})
	}
	for len(pending) > 0 {
		if err := await(b, <-pending, &wire.ProduceReply{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServerPoll: polls of up to 1 MiB from the start of a 4 MiB log
// of 1 KiB records, in batches of 100.
func BenchmarkServerPoll(b *testing.B) {
	tn := startNode(b, nil, nil)
	c := tn.mustDial(b, tn.admin)
	c.createTopic("t", wire.TopicConfig{Durability: wire.DurabilityNone})
	vals := benchValues(100, 1024)
	for range 40 {
		if _, err := c.produce(c.main, "t", 0, batch(b, 0, 0, 0, vals...)); err != nil {
			b.Fatal(err)
		}
	}
	p := c.stream()
	req := &wire.PollRequest{MaxBytes: 1 << 20, Partitions: []wire.PollPartition{{Topic: "t", Position: wire.Position{Mode: wire.PositionOffset}}}}
	var rep wire.PollReply
	if err := c.call(p, req, &rep); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rep.Partitions[0].Batches)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := c.call(p, req, &rep); err != nil {
			b.Fatal(err)
		}
		if st := rep.Partitions[0].Status; st != wire.StatusOK || len(rep.Partitions[0].Batches) == 0 {
			b.Fatalf("poll: %s %q", st, rep.Partitions[0].Message)
		}
	}
}
