package sdk

import (
	"testing"

	"github.com/ledgemq/ledge/record"

	"github.com/ledgemq/ledge/transport/wire"
)

// replayReply is a poll reply frame like a replay's: about 4 MiB of
// stored batches of 100 records of 1 KiB.
func replayReply(b *testing.B) (frame []byte, records int) {
	b.Helper()
	v := make([]byte, 1024)
	for i := range v {
		v[i] = byte('a' + i%26)
	}
	var batches [][]byte
	base := uint64(0)
	for size := 0; size < 4<<20; {
		var bb record.BatchBuilder
		for i := 0; i < 100; i++ {
			bb.Append(record.Record{Timestamp: int64(i), Value: v})
		}
		batch, err := bb.Build(record.CompressionNone)
		if err != nil {
			b.Fatal(err)
		}
		record.StampBaseOffset(batch, base)
		base += 100
		batches = append(batches, batch)
		size += len(batch)
	}
	rep := &wire.PollReply{Partitions: []wire.PollPartitionReply{{Next: base, BatchParts: batches}}}
	frame, err := wire.AppendReply(nil, 1, rep)
	if err != nil {
		b.Fatal(err)
	}
	return frame, int(base)
}

// BenchmarkDecodePollReply decodes a replay's 4 MiB poll reply into
// records, as Consumer.Poll does once the frame is in.
func BenchmarkDecodePollReply(b *testing.B) {
	frame, n := replayReply(b)
	cur := &cursor{pos: AtOffset(0)}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		var reply wire.PollReply
		if err := decodeReply(frame, &reply); err != nil {
			b.Fatal(err)
		}
		recs, err := decodePollPartition("bench", cur, &reply.Partitions[0], nil)
		if err != nil || len(recs) != n {
			b.Fatal(err, len(recs))
		}
		cur.pos = AtOffset(0)
	}
}
