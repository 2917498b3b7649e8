package sdk

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// probingNode is a fake node whose connection a probe resets, as a node
// killed and started again resets, with its first packet, a connection
// it does not know.
type probingNode struct {
	*fakeNode
	mu      sync.Mutex
	streams []requestStream
	probes  []time.Duration
	start   time.Time
}

func (n *probingNode) openStream(ctx context.Context, depth int) (requestStream, int, error) {
	st, d, err := n.fakeNode.openStream(ctx, depth)
	if err == nil {
		n.mu.Lock()
		n.streams = append(n.streams, st)
		n.mu.Unlock()
	}
	return st, d, err
}

func (n *probingNode) probe(_ string, done func()) {
	defer done()
	n.mu.Lock()
	n.probes = append(n.probes, time.Since(n.start))
	streams := n.streams
	n.streams = nil
	n.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, st := range streams {
		_ = st.Close(ctx)
	}
}

// A node that took a produce request and was killed before it answered
// leaves the producer waiting with nothing to send. A second after the
// request, the producer probes the node; the probe draws the restarted
// node's reset, and the batch is resent on a new connection and written
// once, long before the request timeout (30 s here).
func TestProducerProbesAnOverdueReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &probingNode{fakeNode: newFakeNode(), start: time.Now()}
		n.timeout = 30 * time.Second
		n.fault = func(k int, _ uint32) fault {
			if k == 0 {
				return faultHang
			}
			return faultNone
		}
		p, err := newProducer(context.Background(), n, slog.New(slog.DiscardHandler), TopicInfo{Name: "t", Config: TopicConfig{Partitions: 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		p.Produce(context.Background(), &Record{Value: []byte("a")}, func(_ *Record, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatalf("produce: %v", err)
		}
		took := time.Since(n.start)
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		probes := n.probes
		n.mu.Unlock()
		if len(probes) != 1 || probes[0] != produceProbeAfter {
			t.Fatalf("probes at %v, want one at %v", probes, produceProbeAfter)
		}
		if took >= 2*produceProbeAfter {
			t.Fatalf("acknowledged after %v: the probe's reset should have resent it at once", took)
		}
		if got := n.values(0); len(got) != 1 || got[0] != "a" {
			t.Fatalf("log %v, want [a] once", got)
		}
	})
}

// heldProbeNode is a fake node that keeps every probe in flight until
// the test lets them end, as a node past its CPU answers them late.
type heldProbeNode struct {
	*fakeNode
	mu      sync.Mutex
	probes  int
	release chan struct{}
}

func (n *heldProbeNode) probe(_ string, done func()) {
	n.mu.Lock()
	n.probes++
	n.mu.Unlock()
	go func() {
		<-n.release
		done()
	}()
}

func (n *heldProbeNode) probed() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.probes
}

// A node that answers late gets one probe at a time from a producer,
// however many of its requests are overdue: every partition's overdue
// reply does not add a request to a node already behind.
func TestProducerProbesOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &heldProbeNode{fakeNode: newFakeNode(), release: make(chan struct{})}
		n.timeout = 30 * time.Second
		n.fault = func(int, uint32) fault { return faultHang }
		p, err := newProducer(context.Background(), n, slog.New(slog.DiscardHandler),
			TopicInfo{Name: "t", Config: TopicConfig{Partitions: 4}}, []ProducerOption{WithPartitioner(ManualPartitioner())})
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 4)
		for part := range int32(4) {
			p.Produce(context.Background(), &Record{Partition: part, Value: []byte("a")}, func(_ *Record, err error) { errs <- err })
		}
		time.Sleep(3 * produceProbeAfter)
		synctest.Wait()
		if got := n.probed(); got != 1 {
			t.Fatalf("%d probes with four overdue replies and one probe in flight, want 1", got)
		}
		close(n.release)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.Close(ctx)
		for range 4 {
			<-errs
		}
	})
}
