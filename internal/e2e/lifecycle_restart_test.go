package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// TestRestartResume restarts `ledge serve` under an idempotent producer
// sending one record at a time (ProduceSync), by SIGTERM and by SIGKILL,
// half a second down each time. The producer carries on by itself — a
// killed node's successor resets the old connection (its stateless reset
// key comes from the data directory), a stopped node closed it — and
// nothing it was acknowledged is lost or duplicated. It reports the time
// from the node being ready (/readyz 200) to the producer's next
// acknowledgement, per signal (-lifecycle.runs 5 for medians).
func TestRestartResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	node := newServedLedge(t, buildLedge(t), filepath.Join(t.TempDir(), "ledge-data"))
	node.start()
	defer node.checkNoPanic()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := node.dial(ctx)
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "steps", sdk.TopicConfig{Partitions: 1, Durability: sdk.DurabilityAlways}); err != nil {
		t.Fatal(err)
	}
	prod, err := c.NewProducer(ctx, "steps")
	if err != nil {
		t.Fatal(err)
	}
	p := &dayProducer{topic: "steps", acked: map[string]sdk.Record{}, maybe: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("steps-%07d", i)
			r := &sdk.Record{Value: []byte(v)}
			err := prod.ProduceSync(ctx, r)
			p.mu.Lock()
			if err == nil {
				p.acked[v] = sdk.Record{Partition: r.Partition, Offset: r.Offset}
				p.times = append(p.times, time.Now())
			} else {
				p.maybe[v] = true
			}
			p.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()

	resume := map[syscall.Signal][]time.Duration{}
	for range *lifecycleRuns {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			time.Sleep(300 * time.Millisecond)
			node.stop(sig)
			time.Sleep(500 * time.Millisecond)
			ready := node.start()
			d, ok := p.nextAckAfter(ready, safety)
			if !ok {
				t.Fatalf("after %v: no acknowledgement", sig)
			}
			resume[sig] = append(resume[sig], d)
		}
	}
	cancel()
	<-done
	p.check(context.Background(), t, c)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Logf("%v restart: ready to the producer's next acknowledgement %s", sig, median(resume[sig]))
	}
	t.Logf("start to ready (exec to /readyz 200): %s", median(node.readyTimes))
	t.Logf("SIGTERM to exit: %s", median(node.shutdownTimes))
}
