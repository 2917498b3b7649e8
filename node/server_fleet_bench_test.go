package node

import (
	"runtime"
	"testing"
	"time"

	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// The fleet's shape through a real QUIC connection and the engine: a
// device sends one small record per request and waits for its
// acknowledgement, and holds a long poll for its own key that one record
// wakes. allocs/op, B/op and cpu-ns/op (the process's CPU time, steadier
// than the wall time on a loaded machine) are the client's and the
// node's together (a memory profile tells them apart):
//
//	go test ./node -run '^$' -bench Fleet -benchtime 2000x -benchmem \
//	    -memprofile mem.out
//	go tool pprof -sample_index=alloc_space -top mem.out

// fleetValue is a device's record: about 100 bytes.
var fleetValue = string(make([]byte, 100))

// keyedBatch is a batch of one record of key and value, of producer (id,
// epoch) at seq.
func keyedBatch(t testing.TB, id uint64, epoch uint32, seq int32, key, value string) []byte {
	t.Helper()
	var b record.BatchBuilder
	if id != 0 {
		b.SetProducer(id, epoch, seq)
	}
	b.Append(record.Record{Timestamp: 1, Key: []byte(key), Value: []byte(value)})
	out, err := b.Build(record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkFleetProduce: an idempotent producer sends one record of 100
// bytes at a time and waits for its reply, on a topic of durability none.
func BenchmarkFleetProduce(b *testing.B) {
	tn := startNode(b, nil, nil)
	c := tn.mustDial(b, tn.admin)
	c.createTopic("fleet", wire.TopicConfig{Durability: wire.DurabilityNone})
	var id wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{Name: "device"}, &id)
	p := c.stream()
	frames := make([][]byte, b.N)
	for i := range frames {
		frames[i] = keyedBatch(b, id.ProducerID, id.ProducerEpoch, int32(i), "", fleetValue)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuClock()
	for i := range b.N {
		if _, err := c.produce(p, "fleet", 0, frames[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuClock()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkFleetPollWake: a device's long poll for its key is parked,
// one record of that key is produced, and the poll answers with it. An
// operation is the produce and the woken poll.
func BenchmarkFleetPollWake(b *testing.B) {
	tn := startNode(b, nil, nil)
	c := tn.mustDial(b, tn.admin)
	c.createTopic("cmd", wire.TopicConfig{Durability: wire.DurabilityNone})
	var id wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{Name: "controller"}, &id)
	prod, poll := c.stream(), c.stream()
	frames := make([][]byte, b.N)
	for i := range frames {
		frames[i] = keyedBatch(b, id.ProducerID, id.ProducerEpoch, int32(i), "device-7", fleetValue)
	}
	req := &wire.PollRequest{
		MaxWait: 30 * time.Second, Key: wire.PollKey{Mode: wire.KeyExact, Key: []byte("device-7")},
		Partitions: []wire.PollPartition{{Topic: "cmd", Position: wire.Position{Mode: wire.PositionOffset}}},
	}
	cmd, err := tn.lookup("cmd", [16]byte{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuClock()
	for i := range b.N {
		req.Partitions[0].Position.Offset = uint64(i)
		ch := c.send(poll, req)
		for cmd.Owners[0].KeyPolls().Parked == 0 {
			runtime.Gosched()
		}
		if _, err := c.produce(prod, "cmd", 0, frames[i]); err != nil {
			b.Fatal(err)
		}
		var rep wire.PollReply
		if err := await(b, ch, &rep); err != nil {
			b.Fatal(err)
		}
		if got := rep.Partitions[0]; got.Status != wire.StatusOK || got.Next != uint64(i+1) {
			b.Fatalf("poll %d: %s %q, next %d", i, got.Status, got.Message, got.Next)
		}
	}
	b.ReportMetric(float64(cpuClock()-cpu)/float64(b.N), "cpu-ns/op")
}
