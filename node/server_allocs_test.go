package node

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/allocs"
	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// Serving a produce of a producer sending one message at a time costs the
// heap nothing (it cost 6 allocations, 512 bytes, before requests were
// pooled; see request in server.go): on a node with a small heap every
// allocated byte brings the next garbage collection closer, and those
// collections are the slowest acknowledgements of such a producer. The
// request of an
// idempotent producer's batch of one 1 KiB record, on a topic of policy
// none, is handled, its reply finished (the batch is normally written
// by then, and the reading goroutine of a stream replies at once), and
// the request let go of; what the transport allocates to read it is not
// counted.
func TestServeProduceAllocations(t *testing.T) {
	allocs.SkipUnderRace(t)
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{Durability: wire.DurabilityNone})
	var id wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{Name: "p"}, &id)
	tok, err := tn.tokens.Authenticate(tn.admin)
	if err != nil {
		t.Fatal(err)
	}
	sess := session.New((*sessionNode)(tn.Node), tok, "")
	// Past minProdCompact, the engine's producer records awaiting an fsync
	// are compacted in place.
	const warm, runs = 1100, 200
	value := string(make([]byte, 1024))
	frames := make([][]byte, warm+3*(runs+1))
	for i := range frames {
		frames[i] = c.frame(&wire.ProduceRequest{Topic: "t", Batch: batch(t, id.ProducerID, id.ProducerEpoch, int32(i), value)})
	}
	ctx := context.Background()
	next := 0
	var last []byte
	serveOne := func() {
		r := tn.handle(ctx, sess, frames[next])
		next++
		if r.Deferred() {
			r.out = tn.finish(ctx, r)
		}
		last = append(last[:0], r.out.frame...) // the request's buffer is reused once done
		r.done()
	}
	for range warm {
		serveOne()
	}
	n, bytes := allocs.Least(runs, serveOne)
	var rep wire.ProduceReply
	if err := decodeReply(last, &rep); err != nil || rep.BaseOffset != uint64(next-1) {
		t.Fatalf("last produce: %+v, %v; want base offset %d", rep, err, next-1)
	}
	t.Logf("per produce: %.2f allocations, %.1f bytes", n, bytes)
	if n > 1 || bytes > 64 {
		t.Errorf("serving a produce allocates %.2f times, %.1f bytes (want at most 1 and 64)", n, bytes)
	}
}

// A device's command costs the node a handful of small objects on top of
// its produce: its long poll for its own key is read and parked, the
// command's record wakes it, and the reply is written and the request let
// go of. The fleet's shape: a record of about 100 bytes, a poll of one
// partition for one key, on a topic of policy none. What the transport
// allocates to read the two frames is not counted. Before requests were
// pooled, a command cost 61 allocations and 4.8 KB.
func TestServeWokenPollAllocations(t *testing.T) {
	allocs.SkipUnderRace(t)
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("cmd", wire.TopicConfig{Durability: wire.DurabilityNone})
	var id wire.InitProducerReply
	c.mustCall(&wire.InitProducerRequest{Name: "controller"}, &id)
	tok, err := tn.tokens.Authenticate(tn.admin)
	if err != nil {
		t.Fatal(err)
	}
	sess := session.New((*sessionNode)(tn.Node), tok, "")
	cmd, err := tn.lookup("cmd", [16]byte{})
	if err != nil {
		t.Fatal(err)
	}
	keys := cmd.Owners[0]
	const warm, runs = 100, 100
	n := warm + 3*runs + 1
	produces, polls := make([][]byte, n), make([][]byte, n)
	for i := range n {
		produces[i] = c.frame(&wire.ProduceRequest{Topic: "cmd", Batch: keyedBatch(t, id.ProducerID, id.ProducerEpoch, int32(i), "device-7", fleetValue)})
		polls[i] = c.frame(&wire.PollRequest{
			MaxWait: time.Hour, Key: wire.PollKey{Mode: wire.KeyExact, Key: []byte("device-7")},
			Partitions: []wire.PollPartition{{Topic: "cmd", Position: wire.Position{Mode: wire.PositionOffset, Offset: uint64(i)}}},
		})
	}
	// The device's stream: one goroutine reading its polls, as a stream's
	// reading goroutine does.
	ctx := context.Background()
	frames, replies := make(chan []byte), make(chan []byte)
	defer close(frames)
	go func() {
		var last []byte
		for f := range frames {
			r := tn.handle(ctx, sess, f)
			last = last[:0]
			for _, p := range r.out.parts {
				last = append(last, p...)
			}
			r.done()
			replies <- last
		}
	}()
	next := 0
	var reply []byte
	commandOne := func() {
		frames <- polls[next]
		for keys.KeyPolls().Parked == 0 {
			runtime.Gosched()
		}
		r := tn.handle(ctx, sess, produces[next])
		if r.Deferred() {
			r.out = tn.finish(ctx, r)
		}
		r.done()
		reply = <-replies
		next++
	}
	for range warm {
		commandOne()
	}
	count, bytes := allocs.Least(runs, commandOne)
	var rep wire.PollReply
	if err := decodeReply(reply, &rep); err != nil || rep.Partitions[0].Next != uint64(next) || len(values(t, rep.Partitions[0].Batches)) != 1 {
		t.Fatalf("last poll: %+v, %v; want the command at %d", rep, err, next-1)
	}
	t.Logf("per command (its produce and the woken poll): %.2f allocations, %.1f bytes", count, bytes)
	if count > 19 || bytes > 1664 {
		t.Errorf("a command allocates %.2f times, %.1f bytes (want at most 19 and 1664)", count, bytes)
	}
}

// A poll's frame goes back to the transport's free frames once its reply
// is written (decoding copied what the poll keeps): the next frame of its
// size is read into the same memory. A device's poll is about 80 bytes.
func TestServePollRecyclesItsFrame(t *testing.T) {
	tn := startNode(t, nil, nil)
	c := tn.mustDial(t, tn.admin)
	c.createTopic("t", wire.TopicConfig{Durability: wire.DurabilityNone})
	tok, err := tn.tokens.Authenticate(tn.admin)
	if err != nil {
		t.Fatal(err)
	}
	sess := session.New((*sessionNode)(tn.Node), tok, "")
	enc := c.frame(&wire.PollRequest{
		Key:        wire.PollKey{Mode: wire.KeyExact, Key: []byte("device-7")},
		Partitions: []wire.PollPartition{{Topic: "t", Position: wire.Position{Mode: wire.PositionOffset}}},
	})
	if len(enc) < quic.MinPooledFrame {
		t.Fatalf("a poll of %d bytes is below the pooled frames", len(enc))
	}
	f := quic.FrameBuffer(len(enc))
	copy(f, enc)
	r := tn.handle(context.Background(), sess, f)
	var rep wire.PollReply
	if err := decodeReply(r.out.frame, &rep); err != nil || rep.Partitions[0].Status != wire.StatusOK {
		t.Fatalf("poll: %+v, %v", rep, err)
	}
	r.done()
	if next := quic.FrameBuffer(len(enc)); &next[0] != &f[0] {
		t.Fatal("the next frame of a poll's size was not read into the poll's frame")
	}
}
