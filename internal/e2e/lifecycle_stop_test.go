package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/sdk"
)

// TestStopDuringPipelinedProduce stops `ledge serve` while a producer
// pipelines batches of 5 records to a topic with durability always: by
// SIGTERM (the node exits with status 0) and by SIGKILL. The stop comes
// once 100 batches are acknowledged, with more in flight. The producer
// stops producing, and the node is restarted on the same data directory
// and address. Every record handed to the producer is answered —
// acknowledged, or failed with an unknown outcome — none hangs; every
// acknowledged record is in the log once, at the offset its
// acknowledgement gave, and nothing that was not produced is there. The
// restarted node stops gracefully on SIGTERM.
func TestStopDuringPipelinedProduce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the ledge binary")
	}
	bin := buildLedge(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			stopDuringPipelinedProduce(t, bin, sig)
		})
	}
}

func stopDuringPipelinedProduce(t *testing.T, bin string, sig syscall.Signal) {
	node := newServedLedge(t, bin, filepath.Join(t.TempDir(), "ledge-data"))
	node.start()
	defer node.checkNoPanic()
	ctx := testContext(t)
	// A killed node closes nothing: the request timeout, not the idle
	// timeout, tells the client to reconnect.
	c := node.dial(ctx, sdk.WithRequestTimeout(2*time.Second))
	defer c.Close()
	const topic = "stopped"
	if _, err := c.CreateTopic(ctx, topic, sdk.TopicConfig{Partitions: 1, Durability: sdk.DurabilityAlways}); err != nil {
		t.Fatal(err)
	}
	const perBatch, stopAfter = 5, 100
	prod, err := c.NewProducer(ctx, topic, sdk.WithMaxBatchRecords(perBatch), sdk.WithMaxInFlight(40*perBatch))
	if err != nil {
		t.Fatal(err)
	}

	p := &dayProducer{topic: topic, acked: map[string]sdk.Record{}, maybe: map[string]bool{}}
	var (
		answered  sync.WaitGroup
		acked     atomic.Int64
		producing atomic.Bool
		sent      = make(chan int, 1)
		enough    = make(chan struct{})
		once      sync.Once
	)
	producing.Store(true)
	go func() {
		i := 0
		defer func() { sent <- i }()
		for ; producing.Load(); i++ {
			v := fmt.Sprintf("b%05d-r%d", i/perBatch, i%perBatch)
			answered.Add(1)
			prod.Produce(ctx, &sdk.Record{Value: []byte(v)}, func(r *sdk.Record, err error) {
				defer answered.Done()
				p.mu.Lock()
				defer p.mu.Unlock()
				switch {
				case err == nil:
					p.acked[v] = sdk.Record{Partition: r.Partition, Offset: r.Offset}
					if acked.Add(1) == stopAfter*perBatch {
						once.Do(func() { close(enough) })
					}
				case errors.Is(err, sdk.ErrUnknownOutcome):
					p.maybe[v] = true
				default:
					t.Errorf("produce %s: %v", v, err)
				}
			})
		}
	}()
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatal("the producer got no acknowledgements")
	}
	node.stop(sig) // after SIGTERM, fails the test unless the exit status is 0
	producing.Store(false)
	ackedAtStop := acked.Load()

	// Restart on the same data directory and address: the producer sends
	// what it still holds, and every record gets its answer.
	node.start()
	n := <-sent
	if err := prod.Close(ctx); err != nil {
		t.Fatal(err)
	}
	answered.Wait()
	p.mu.Lock()
	if got := len(p.acked) + len(p.maybe); got != n {
		t.Errorf("%d records produced, %d answered", n, got)
	}
	t.Logf("%v after %d records acknowledged: %d produced, %d acknowledged, %d of unknown outcome",
		sig, ackedAtStop, n, len(p.acked), len(p.maybe))
	p.mu.Unlock()

	p.check(ctx, t, c)
	node.stop(syscall.SIGTERM)
}
