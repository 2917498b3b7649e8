package node

import (
	"context"
	"testing"

	"github.com/ledgemq/ledge/internal/allocs"
	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/transport/wire"
)

// Serving a produce of a producer sending one message at a time costs the
// heap a few small objects: on a node with a small heap every allocated
// byte brings the next garbage collection closer, and those collections
// are the slowest acknowledgements of such a producer. The request of an
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
		last = r.out.frame
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
	if n > 6 || bytes > 512 {
		t.Errorf("serving a produce allocates %.2f times, %.1f bytes (want at most 6 and 512)", n, bytes)
	}
}
