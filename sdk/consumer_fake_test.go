package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// fakeConsumerNode models what a node does with the polls of one named
// consumer on partition 0 of a topic: "next" continues from the
// consumer's delivered position while it has one, else from its
// committed offset, else from the start (ResetEarliest); every poll moves
// the delivered position. It can lose the reply of a poll it completed.
// It implements consumerBackend.
type fakeConsumerNode struct {
	t *testing.T

	mu           sync.Mutex
	log          []string
	committedAt  uint64
	hasCommitted bool
	delivered    uint64
	hasDelivered bool
	polls        int
	froms        []string // the position of every poll, as asked
	// lose says whether the reply to the n-th poll (from 0) is lost
	// after the node completed it.
	lose func(n int) bool
	// fail, when it returns a status, fails the n-th poll's partition
	// with it (nothing delivered, the position unchanged), as a filter
	// plugin's failure does.
	fail func(n int) (wire.Status, string)
}

const fakeSession = 7

func (n *fakeConsumerNode) openStream(context.Context, int) (requestStream, int, error) {
	return &fakePollStream{n: n}, 1 << 20, nil
}

func (n *fakeConsumerNode) call(context.Context, wire.Message, wire.Message) error {
	return errors.New("fake: not served")
}

func (n *fakeConsumerNode) committed(_ context.Context, topic string, who wire.Consumer, parts []int32) ([]committedWithToken, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if who.Session != fakeSession {
		n.t.Errorf("committed asked as session %d", who.Session)
	}
	out := make([]committedWithToken, len(parts))
	for i, p := range parts {
		tok, _ := n.token(n.nextLocked(), n.nextLocked()).MarshalBinary()
		out[i] = committedWithToken{
			CommittedOffset: CommittedOffset{Partition: p, Offset: n.committedAt, Committed: n.hasCommitted, History: 1},
			token:           tok,
		}
	}
	return out, nil
}

func (n *fakeConsumerNode) nextID() uint32                { return 1 }
func (n *fakeConsumerNode) requestTimeout() time.Duration { return time.Minute }
func (n *fakeConsumerNode) streamTimedOut(requestStream)  {}
func (n *fakeConsumerNode) logger() *slog.Logger          { return slog.New(slog.DiscardHandler) }

func (n *fakeConsumerNode) token(from, next uint64) fence.Token {
	return fence.Token{Kind: fence.HolderConsumer, History: 1, Session: fakeSession, From: from, Next: next}
}

// nextLocked is where "next" starts.
func (n *fakeConsumerNode) nextLocked() uint64 {
	switch {
	case n.hasDelivered:
		return n.delivered
	case n.hasCommitted:
		return n.committedAt
	}
	return 0
}

// poll answers a poll frame, and says whether its reply is lost.
func (n *fakeConsumerNode) poll(frame []byte) ([]byte, bool) {
	f, err := parseTestFrame(frame)
	if err != nil {
		panic(err)
	}
	var req wire.PollRequest
	if err := wire.DecodeRequest(f, &req); err != nil {
		panic(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail != nil {
		if s, msg := n.fail(n.polls); s != wire.StatusOK {
			n.polls++
			reply, err := wire.AppendReply(nil, f.ID, &wire.PollReply{Partitions: []wire.PollPartitionReply{{
				Status: s, Message: msg, History: 1, HighWatermark: uint64(len(n.log)),
			}}})
			if err != nil {
				panic(err)
			}
			return reply, false
		}
	}
	pos := req.Partitions[0].Position
	var from uint64
	switch pos.Mode {
	case wire.PositionNext:
		from = n.nextLocked()
		n.froms = append(n.froms, "next")
	case wire.PositionOffset:
		from = pos.Offset
		n.froms = append(n.froms, fmt.Sprint(pos.Offset))
	case wire.PositionFirst:
		n.froms = append(n.froms, "first")
	default:
		panic(fmt.Sprintf("fake: position %s", pos.Mode))
	}
	end := min(from+uint64(max(req.MaxMessages, 1)), uint64(len(n.log)))
	var batches []byte
	if end > from {
		batches = storedBatch(n.t, from, record.CompressionNone, n.log[from:end]...)
	} else {
		end = from
	}
	n.delivered, n.hasDelivered = end, true
	tok, _ := n.token(from, end).MarshalBinary()
	reply, err := wire.AppendReply(nil, f.ID, &wire.PollReply{Partitions: []wire.PollPartitionReply{{
		History: 1, HighWatermark: uint64(len(n.log)), Next: end, Token: tok, Payload: wire.PayloadStored, Batches: batches,
	}}})
	if err != nil {
		panic(err)
	}
	k := n.polls
	n.polls++
	return reply, n.lose != nil && n.lose(k)
}

// fakePollStream answers each poll at once; a lost reply breaks the
// stream, as a connection lost after the node answered would.
type fakePollStream struct {
	n      *fakeConsumerNode
	mu     sync.Mutex
	broken bool
}

func (s *fakePollStream) Send(_ context.Context, frame []byte, cb func([]byte, error)) error {
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		return &quic.NotProcessedError{Cause: errFakeConnLost}
	}
	s.mu.Unlock()
	reply, lost := s.n.poll(frame)
	if lost {
		s.mu.Lock()
		s.broken = true
		s.mu.Unlock()
		cb(nil, errFakeConnLost)
		return nil
	}
	cb(reply, nil)
	return nil
}

func (s *fakePollStream) Close(context.Context) error { return nil }

// newFakeConsumer is a named consumer of partition 0 attached with
// fakeSession, as NewConsumer makes it.
func newFakeConsumer(n *fakeConsumerNode, opts ...ConsumerOption) *Consumer {
	cfg := defaultConsumerConfig()
	opts = append([]ConsumerOption{WithConsumerName("c"), WithStart(AtCommitted()), WithMaxMessages(2)}, opts...)
	for _, o := range opts {
		o.applyConsumer(&cfg)
	}
	cur := &cursor{partition: 0, pos: cfg.start}
	return &Consumer{b: n, topic: "t", cfg: cfg, cursors: []*cursor{cur}, byPart: map[int32]*cursor{0: cur},
		who: wire.Consumer{Kind: wire.ConsumerNamed, Name: "c", Session: fakeSession}}
}

// pollValues polls until it got want values, and counts the polls that
// failed.
func pollValues(t *testing.T, c *Consumer, want int) (got []string, failures int) {
	t.Helper()
	for polls := 0; len(got) < want; polls++ {
		if polls > 4*want {
			t.Fatalf("%d polls returned %v, want %d records", polls, got, want)
		}
		recs, err := c.Poll(context.Background())
		if err != nil {
			failures++
			if failures > 5 {
				t.Fatalf("poll keeps failing: %v", err)
			}
			continue
		}
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	return got, failures
}

// TestConsumerLostReplyDoesNotSkip: a poll whose reply is lost after the
// node completed it moved the node's delivered position; polled again,
// the consumer still gets those records, because only its very first
// position comes from the node ("next" resolved to an explicit offset
// before any poll), and every later poll asks for its own next offset.
func TestConsumerLostReplyDoesNotSkip(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed bool
		lose      []int
		want      []string
	}{
		{"first poll lost, no committed offset", false, []int{0}, []string{"a", "b", "c", "d", "e", "f"}},
		{"first poll lost, resumes at committed 2", true, []int{0}, []string{"c", "d", "e", "f"}},
		{"later polls lost", false, []int{1, 3}, []string{"a", "b", "c", "d", "e", "f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &fakeConsumerNode{t: t, log: []string{"a", "b", "c", "d", "e", "f"},
				lose: func(k int) bool { return slices.Contains(tc.lose, k) }}
			if tc.committed {
				n.committedAt, n.hasCommitted = 2, true
			}
			c := newFakeConsumer(n, WithPrefetch(false))
			got, failures := pollValues(t, c, len(tc.want))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("records %v, want %v (polls from %v)", got, tc.want, n.froms)
			}
			if failures != len(tc.lose) {
				t.Fatalf("%d polls failed, want %d", failures, len(tc.lose))
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if slices.Contains(n.froms, "next") {
				t.Fatalf("polled from next: %v", n.froms)
			}
		})
	}
}

// TestConsumerResetLatestKeepsNext: with ResetLatest and no committed
// offset the node decides where "next" starts; the consumer does not
// guess.
func TestConsumerResetLatestKeepsNext(t *testing.T) {
	n := &fakeConsumerNode{t: t, log: []string{"a", "b"}}
	c := newFakeConsumer(n, WithPrefetch(false), WithResetPolicy(ResetLatest))
	if _, err := c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Equal(n.froms, []string{"next"}) {
		t.Fatalf("polls from %v, want [next]", n.froms)
	}
}
