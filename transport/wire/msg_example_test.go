package wire_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ledgemq/ledge/record"

	"github.com/ledgemq/ledge/transport/wire"
)

// A poll and its reply on one stream, from the client's request to the
// records and the commit that carries the poll's fence token.
func Example_poll() {
	var stream bytes.Buffer // stands for one QUIC stream, both directions

	// Client: poll partition 0 from the consumer's committed position.
	poll := &wire.PollRequest{
		Consumer: wire.Consumer{Kind: wire.ConsumerNamed, Name: "billing", Session: 7},
		MaxBytes: 1 << 20,
		Partitions: []wire.PollPartition{{
			Topic: "sensors", Position: wire.Position{Mode: wire.PositionNext, Reset: wire.PositionFirst},
		}},
	}
	out, _ := wire.AppendRequest(nil, 1, poll)
	stream.Write(out)

	// Node: read the frame, check it, decode it, answer.
	f, _ := wire.ReadFrame(&stream, nil, wire.DefaultMaxFrameSize)
	var req wire.PollRequest
	if err := wire.DecodeRequest(f, &req); err != nil {
		stream.Write(wire.AppendErrorReply(nil, f.FrameHeader, wire.StatusOf(err), err.Error()))
		return
	}
	var b record.BatchBuilder
	b.Append(record.Record{Timestamp: 1700000000000, Value: []byte("21.5")})
	b.Append(record.Record{Timestamp: 1700000000100, Value: []byte("21.7")})
	batch, _ := b.Build(record.CompressionNone)
	record.StampBaseOffset(batch, 40)
	reply := &wire.PollReply{Partitions: []wire.PollPartitionReply{{
		History: 2, StartOffset: 12, HighWatermark: 42, Next: 42,
		Token:      []byte("opaque fence token"),
		BatchParts: [][]byte{batch}, // the engine's read result, not joined
	}}}
	out, _ = wire.AppendReply(nil, f.ID, reply)
	stream.Write(out)

	// Client: decode the reply, walk the records, commit with the token.
	f, _ = wire.ReadFrame(&stream, nil, wire.DefaultMaxFrameSize)
	var got wire.PollReply
	if err := wire.DecodeReply(f, &got); err != nil {
		var e *wire.Error
		if errors.As(err, &e) {
			fmt.Println("poll failed:", e, "- next step:", e.RetryClass())
		}
		return
	}
	p := got.Partitions[0]
	for rest := p.Batches; len(rest) > 0; {
		var batch []byte
		batch, rest, _ = wire.NextBatch(rest)
		it, _ := record.NewRecordIterator(batch, 0)
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			fmt.Printf("offset %d: %s\n", r.Offset, r.Value)
		}
	}
	commit := &wire.CommitRequest{
		Consumer: req.Consumer,
		Offsets:  []wire.CommitOffset{{Topic: "sensors", Partition: 0, Offset: p.Next, Token: p.Token}},
	}
	out, _ = wire.AppendRequest(nil, 2, commit)
	fmt.Printf("commit through %d: %d-byte frame\n", p.Next, len(out))
	// Output:
	// offset 40: 21.5
	// offset 41: 21.7
	// commit through 42: 85-byte frame
}

// Every status says what a client does next.
func ExampleStatus_RetryClass() {
	for _, s := range []wire.Status{
		wire.StatusNotEnoughSpace, wire.StatusStaleHistory, wire.StatusUnknownProducer,
		wire.StatusFencedMember, wire.StatusForbidden,
	} {
		fmt.Printf("%-20s %s\n", s, s.RetryClass())
	}
	// Output:
	// not enough space     retry
	// stale history        refresh
	// unknown producer     reinitialize
	// fenced member        rejoin
	// forbidden            give-up
}
