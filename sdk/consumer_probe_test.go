package sdk

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// silentNode takes polls and never answers them, as a node killed under
// a parked poll: the client's connection looks alive until a packet of
// its meets the node's successor. A call is such a packet when restarted
// is set: the successor's stateless reset ends the connection, and with
// it the poll waiting on it.
type silentNode struct {
	*fakeConsumerNode
	restarted bool

	mu     sync.Mutex
	probes []wire.Kind
	waits  []func([]byte, error)
}

var errFakeReset = errors.New("fake: received a stateless reset")

func (n *silentNode) openStream(context.Context, int) (requestStream, int, error) {
	return silentStream{n}, 1 << 20, nil
}

func (n *silentNode) call(_ context.Context, req, _ wire.Message) error {
	n.mu.Lock()
	n.probes = append(n.probes, req.Kind())
	waits := n.waits
	if n.restarted {
		n.waits = nil
	}
	n.mu.Unlock()
	if !n.restarted {
		return nil
	}
	for _, cb := range waits {
		cb(nil, errFakeReset)
	}
	return errFakeReset
}

func (n *silentNode) probed() []wire.Kind {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]wire.Kind(nil), n.probes...)
}

type silentStream struct{ n *silentNode }

func (s silentStream) Send(_ context.Context, _ []byte, cb func([]byte, error)) error {
	s.n.mu.Lock()
	s.n.waits = append(s.n.waits, cb)
	s.n.mu.Unlock()
	return nil
}

// Close aborts the stream (the consumer closes it with an ended context):
// every poll waiting on it fails.
func (s silentStream) Close(context.Context) error {
	s.n.mu.Lock()
	waits := s.n.waits
	s.n.waits = nil
	s.n.mu.Unlock()
	for _, cb := range waits {
		cb(nil, errFakeConnLost)
	}
	return nil
}

// TestAnOverduePollProbesTheNode: a poll unanswered a second past its max
// wait makes the consumer send the node one small request. Against a
// restarted node that request meets a stateless reset, and the poll
// fails at once as a reset connection instead of waiting out the request
// timeout (a minute here); the next Poll reconnects.
func TestAnOverduePollProbesTheNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &silentNode{fakeConsumerNode: &fakeConsumerNode{t: t}, restarted: true}
		const maxWait = 5 * time.Second
		c := newFakeConsumer(n.fakeConsumerNode, WithMaxWait(maxWait))
		c.b = n
		res := pollAsync(context.Background(), c)
		time.Sleep(maxWait + pollProbeAfter - time.Millisecond)
		synctest.Wait()
		if got := n.probed(); len(got) != 0 {
			t.Fatalf("probed %v before the poll was overdue", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := n.probed(); len(got) != 1 || got[0] != wire.KindDescribeTopic {
			t.Fatalf("probes once the poll was overdue: %v, want one DescribeTopic", got)
		}
		select {
		case p := <-res:
			if !errors.Is(p.err, errFakeReset) {
				t.Fatalf("the overdue poll: %v, want the reset connection's error", p.err)
			}
		default:
			t.Fatal("the poll still waits after its connection was reset")
		}
	})
}

// TestASlowNodeIsProbedOnce: a node alive but slow answers the probe; the
// poll keeps waiting, and no other probe is sent before its request
// timeout ends it.
func TestASlowNodeIsProbedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &silentNode{fakeConsumerNode: &fakeConsumerNode{t: t}}
		c := newFakeConsumer(n.fakeConsumerNode, WithMaxWait(time.Second))
		c.b = n
		res := pollAsync(context.Background(), c)
		time.Sleep(time.Second + pollProbeAfter + time.Millisecond)
		synctest.Wait()
		select {
		case p := <-res:
			t.Fatalf("the poll ended when the slow node answered the probe: %v", p.err)
		default:
		}
		p := <-res // the request timeout (the fake's minute) ends it
		if p.err == nil {
			t.Fatal("an unanswered poll succeeded")
		}
		if got := n.probed(); len(got) != 1 {
			t.Fatalf("probes of one poll: %v, want one", got)
		}
	})
}
