package sdk

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// busyConsumerNode answers its first busy polls busy, with a retry-after,
// and records when each poll came.
type busyConsumerNode struct {
	*fakeConsumerNode
	busy       int
	retryAfter time.Duration

	mu sync.Mutex
	at []time.Time
}

func (n *busyConsumerNode) openStream(context.Context, int) (requestStream, int, error) {
	return &busyPollStream{inner: &fakePollStream{n: n.fakeConsumerNode}, n: n}, 1 << 20, nil
}

type busyPollStream struct {
	inner *fakePollStream
	n     *busyConsumerNode
}

func (s *busyPollStream) Send(ctx context.Context, frame []byte, cb func([]byte, error)) error {
	s.n.mu.Lock()
	s.n.at = append(s.n.at, time.Now())
	busy := len(s.n.at) <= s.n.busy
	s.n.mu.Unlock()
	if busy {
		f, err := parseTestFrame(frame)
		if err != nil {
			return err
		}
		cb(wire.AppendBusyReply(nil, f.FrameHeader, "busy", s.n.retryAfter), nil)
		return nil
	}
	return s.inner.Send(ctx, frame, cb)
}

func (s *busyPollStream) Close(ctx context.Context) error { return s.inner.Close(ctx) }

// A poll answered busy fails with ErrBusy; the consumer's next poll waits
// the node's retry-after (with its jitter, at most twice it) before it
// goes, gets the records, and the busy answer is counted.
func TestConsumerWaitsTheNodesRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &busyConsumerNode{fakeConsumerNode: &fakeConsumerNode{t: t, log: []string{"a", "b"}}, busy: 1, retryAfter: 3 * time.Second}
		c := newFakeConsumer(n.fakeConsumerNode, WithPrefetch(false))
		c.b = n
		_, err := c.Poll(context.Background())
		if !errors.Is(err, ErrBusy) || !IsRetryable(err) {
			t.Fatalf("first poll: got %v, want a retryable ErrBusy", err)
		}
		var e *Error
		if !errors.As(err, &e) || e.RetryAfter != 3*time.Second {
			t.Fatalf("first poll's error %+v: want retry after 3s", e)
		}
		recs, err := c.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		if !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("records %v, want [a b]", got)
		}
		if gap := n.at[1].Sub(n.at[0]); gap < 3*time.Second || gap > 6*time.Second {
			t.Fatalf("polled again %v after the busy answer: want the retry-after of 3s, plus at most as much again", gap)
		}
		if st := c.Stats(); st.Busy != 1 {
			t.Fatalf("stats %+v, want one busy answer", st)
		}
	})
}
