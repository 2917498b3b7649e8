package e2e

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// A stream's reply writer runs only while replies are owed: once a poll
// reply (which always goes through the writer) is delivered and the
// client is idle, no writer goroutine is left, though the client's
// producer and consumer streams stay open. A fleet of idle devices then
// costs the node no goroutine per stream beyond its reader.
func TestIdleStreamsHoldNoReplyWriter(t *testing.T) {
	ctx, dial := servedNode(t)
	c := dial()
	if _, err := c.CreateTopic(ctx, "idle", sdk.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewProducer(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	cons, err := c.NewConsumer(ctx, "idle", sdk.WithStart(sdk.AtFirst()), sdk.WithPrefetch(false))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	if recs, err := cons.Poll(ctx); err != nil || len(recs) != 1 {
		t.Fatalf("poll: %d records, %v", len(recs), err)
	}
	// The writer ends once it has settled the reply: wait for it, for
	// ten seconds at most (a safety bound; it ends within milliseconds).
	giveUp := time.Now().Add(10 * time.Second)
	for writers := replyWriters(); writers > 0; writers = replyWriters() {
		if time.Now().After(giveUp) {
			t.Fatalf("%d reply writers still run with every stream idle", writers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// replyWriters counts the goroutines in the node's reply writer.
func replyWriters() int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "node.(*Node).writeReplies(")
}
