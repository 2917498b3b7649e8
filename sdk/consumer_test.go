package sdk

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// storedBatch builds a batch of values as the node stores it: based at base.
func storedBatch(t *testing.T, base uint64, c record.Compression, values ...string) []byte {
	t.Helper()
	var b record.BatchBuilder
	for i, v := range values {
		b.Append(record.Record{Timestamp: int64(1000 + i), Key: []byte("k"), Value: []byte(v),
			Headers: []record.Header{{Key: "i", Value: []byte(fmt.Sprint(i))}}})
	}
	batch, err := b.Build(c)
	if err != nil {
		t.Fatal(err)
	}
	record.StampBaseOffset(batch, base)
	return batch
}

// TestDecodePollPartition: records before the poll's start (the node
// returns whole batches) are skipped, compressed and plain batches both
// decode into records that outlive the next batch, headers are per record,
// and the delivery covers the token's range.
func TestDecodePollPartition(t *testing.T) {
	var batches []byte
	batches = append(batches, storedBatch(t, 10, record.CompressionZstd, "a", "b", "c")...)
	batches = append(batches, storedBatch(t, 13, record.CompressionNone, "d", "e")...)
	batches = append(batches, storedBatch(t, 15, record.CompressionS2, "f", "g")...)
	tok, err := fence.Token{Kind: fence.HolderConsumer, Partition: 3, History: 1, From: 11, Next: 17}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	cur := &cursor{partition: 3, pos: AtCommitted()}
	pp := newPollPartition("t", cur, &wire.PollPartitionReply{Token: tok, Next: 17}, nil)
	recs, err := decodeRecords(pp, batches)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s@%d/%s", r.Value, r.Offset, r.Headers[0].Value))
		if r.Topic != "t" || r.Partition != 3 || r.poll != pp {
			t.Fatalf("record %+v", r)
		}
	}
	want := []string{"b@11/1", "c@12/2", "d@13/0", "e@14/1", "f@15/0", "g@16/1"}
	if !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if pp.from != 11 || pp.next != 17 || !slices.Equal(pp.token, tok) {
		t.Fatalf("delivery %+v", pp)
	}
}

// Recycling a poll's records hands its buffer back once, however often
// they are recycled: two later replies never share the buffer.
func TestRecycleHandsAPollsBufferBackOnce(t *testing.T) {
	const n = 64 << 10
	frame := &pollFrame{buf: quic.FrameBuffer(n)}
	pp := &pollPartition{frame: frame}
	recs := []*Record{{poll: pp}, {poll: pp}, {}, {poll: &pollPartition{}}}
	Recycle(recs)
	Recycle(recs[:1])
	a, b := quic.FrameBuffer(n), quic.FrameBuffer(n)
	if &a[0] == &b[0] {
		t.Fatal("two frames were given the same buffer")
	}
	if &a[0] != &frame.buf[0] && &b[0] != &frame.buf[0] {
		t.Fatal("the recycled poll's buffer was not reused")
	}
}

// A poll decoded after another was recycled reuses its records, and each
// record reads as the new poll delivered it, nothing of the old one left:
// not its headers either.
func TestRecycledRecordsReadAsTheNextPoll(t *testing.T) {
	withHeaders := storedBatch(t, 0, record.CompressionNone, "a", "b", "c")
	var plain record.BatchBuilder
	for _, v := range []string{"x", "y"} {
		plain.Append(record.Record{Timestamp: 5, Value: []byte(v)})
	}
	second, err := plain.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	record.StampBaseOffset(second, 40)

	first := &pollFrame{}
	recs, err := decodeRecords(&pollPartition{topic: "t", next: 3, frame: first}, withHeaders)
	if err != nil || len(recs) != 3 {
		t.Fatal(len(recs), err)
	}
	old := recs[0]
	Recycle(recs)
	again, err := decodeRecords(&pollPartition{topic: "t", from: 40, next: 42, frame: &pollFrame{}}, second)
	if err != nil || len(again) != 2 {
		t.Fatal(len(again), err)
	}
	if again[0] != old {
		t.Error("the recycled records were not reused")
	}
	for i, r := range again {
		if string(r.Value) != []string{"x", "y"}[i] || r.Offset != uint64(40+i) || r.Headers != nil || r.Key != nil {
			t.Errorf("record %d reads %q@%d key %q headers %v", i, r.Value, r.Offset, r.Key, r.Headers)
		}
	}
}

// Recycle reads none of the records after handing them back: another
// consumer may decode into them at once. (The race detector, which the
// core packages' tests run under, sees a read that comes after.)
func TestRecycleReadsNothingItHandedBack(t *testing.T) {
	frame := &pollFrame{}
	recs, err := decodeRecords(&pollPartition{topic: "t", next: 3, frame: frame},
		storedBatch(t, 0, record.CompressionNone, "a", "b", "c"))
	if err != nil || len(recs) != 3 {
		t.Fatal(len(recs), err)
	}
	ours := recs[0]
	spareRecords.mu.Lock()
	spareRecords.slabs, spareRecords.lists = nil, nil // room for ours
	spareRecords.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Recycle(recs)
	}()
	// Another consumer, decoding into the arrays once they are back.
	for recycled := false; ; {
		slab, list := recordArrays(len(recs))
		if cap(slab) > 0 && &slab[:1][0] == ours {
			slab = slab[:cap(slab)]
			for i := range slab {
				slab[i] = Record{Topic: "other"}
			}
			clear(list[:cap(list)])
			break
		}
		if recycled {
			t.Fatal("the recycled records were not handed back")
		}
		select {
		case <-done:
			recycled = true
		default:
			runtime.Gosched()
		}
	}
	<-done
}

// TestHostileRecordCountDoesNotAllocate: a node's batch whose header
// claims 4,294,967,295 records is refused (its CRC no longer matches)
// without the client sizing anything from the claim.
func TestHostileRecordCountDoesNotAllocate(t *testing.T) {
	batch := storedBatch(t, 0, record.CompressionNone, "a")
	batch[28], batch[29], batch[30], batch[31] = 0xff, 0xff, 0xff, 0xff // the record count
	pp := newPollPartition("t", &cursor{partition: 0, pos: AtCommitted()}, &wire.PollPartitionReply{Next: 1}, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decodeRecords(pp, batch)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a batch claiming 4,294,967,295 records decoded")
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Fatalf("decoding a %d-byte batch claiming 4,294,967,295 records allocated %d bytes", len(batch), grown)
	}
}
