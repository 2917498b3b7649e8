package sdk

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// heldNode is a fakeConsumerNode whose streams hold every poll until the
// test answers it, the start of its reply first and the rest after.
type heldNode struct {
	*fakeConsumerNode
	mu   sync.Mutex
	open []*heldStream
}

func (n *heldNode) openStream(context.Context, int) (requestStream, int, error) {
	s := &heldStream{}
	n.mu.Lock()
	n.open = append(n.open, s)
	n.mu.Unlock()
	return s, 1 << 20, nil
}

func (n *heldNode) streams() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.open)
}

func (n *heldNode) stream(i int) *heldStream {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.open[i]
}

type heldCall struct {
	frame []byte
	head  func([]byte)
	cb    func([]byte, error)
}

// heldStream is a requestStream with SendHead, as a quic.Pipeline is.
type heldStream struct {
	mu       sync.Mutex
	calls    []*heldCall
	answered int
	closed   bool
}

func (s *heldStream) Send(ctx context.Context, frame []byte, cb func([]byte, error)) error {
	return s.SendHead(ctx, frame, 0, nil, cb)
}

func (s *heldStream) SendHead(_ context.Context, frame []byte, _ int, head func([]byte), cb func([]byte, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return &quic.NotProcessedError{Cause: errFakeConnLost}
	}
	s.calls = append(s.calls, &heldCall{frame: frame, head: head, cb: cb})
	return nil
}

// Close fails the polls not answered, as an aborted pipeline does.
func (s *heldStream) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	left := s.calls[s.answered:]
	s.answered = len(s.calls)
	s.mu.Unlock()
	for _, c := range left {
		c.cb(nil, &quic.NotProcessedError{Cause: errFakeConnLost})
	}
	return nil
}

// open says whether a poll sent on s is not answered yet.
func (s *heldStream) open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls) > s.answered
}

func (s *heldStream) sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// position is where the i-th poll sent on s starts.
func (s *heldStream) position(t *testing.T, i int) string {
	t.Helper()
	s.mu.Lock()
	frame := s.calls[i].frame
	s.mu.Unlock()
	f, err := parseTestFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	var req wire.PollRequest
	if err := wire.DecodeRequest(f, &req); err != nil {
		t.Fatal(err)
	}
	pos := req.Partitions[0].Position
	return fmt.Sprintf("%s %d", pos.Mode, pos.Offset)
}

// replyHead has the node answer the next unanswered poll and hands the
// start of the reply to the consumer; it returns the whole reply.
func (s *heldStream) replyHead(t *testing.T, n *fakeConsumerNode) []byte {
	t.Helper()
	s.mu.Lock()
	c := s.calls[s.answered]
	s.mu.Unlock()
	reply, _ := n.poll(c.frame)
	if len(reply) <= pollHeadLen || c.head == nil {
		t.Fatalf("a reply of %d bytes, head hook %v: the test wants a large reply with a hook", len(reply), c.head != nil)
	}
	c.head(reply[:pollHeadLen])
	return reply
}

// finish hands the rest of the reply to the consumer.
func (s *heldStream) finish(reply []byte) {
	s.mu.Lock()
	c := s.calls[s.answered]
	s.answered++
	s.mu.Unlock()
	c.cb(reply, nil)
}

func heldConsumer(t *testing.T, values int) (*Consumer, *heldNode) {
	n := &fakeConsumerNode{t: t}
	for i := range values {
		n.log = append(n.log, strings.Repeat(string(rune('a'+i)), 100))
	}
	c := newFakeConsumer(n, WithStart(AtOffset(0)), WithMaxMessages(3))
	hn := &heldNode{fakeConsumerNode: n}
	c.b = hn
	return c, hn
}

type polled struct {
	values []string
	err    error
}

func pollAsync(ctx context.Context, c *Consumer) chan polled {
	out := make(chan polled, 1)
	go func() {
		recs, err := c.Poll(ctx)
		var p polled
		for _, r := range recs {
			p.values = append(p.values, string(r.Value[:1]))
		}
		p.err = err
		out <- p
	}()
	return out
}

// firstPollHead starts a Poll, has the node answer it, and hands the
// start of the reply to the consumer; it returns the Poll's result, the
// stream and the whole reply, whose rest the test delivers (finish).
// Within a synctest bubble.
func firstPollHead(t *testing.T, ctx context.Context, c *Consumer, hn *heldNode) (chan polled, *heldStream, []byte) {
	t.Helper()
	res := pollAsync(ctx, c)
	synctest.Wait()
	st := hn.stream(0)
	reply := st.replyHead(t, hn.fakeConsumerNode)
	synctest.Wait()
	return res, st, reply
}

// TestConsumerSendsItsNextPollFromTheStartOfALargeReply: a consumer of
// one partition sends its next poll as soon as the start of a reply says
// where the partition continues, while the rest of the reply is still on
// its way; the next Poll takes that poll's reply, and every record comes
// once, in order.
func TestConsumerSendsItsNextPollFromTheStartOfALargeReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, hn := heldConsumer(t, 9)
		first, st, reply := firstPollHead(t, context.Background(), c, hn)
		if st.sent() != 2 {
			t.Fatalf("%d polls sent once the start of the first reply came, want 2 (the next one sent ahead)", st.sent())
		}
		if got := st.position(t, 1); got != "offset 3" {
			t.Fatalf("the poll sent ahead starts at %s, want offset 3 (where the first reply's partition continues)", got)
		}
		st.finish(reply)
		if p := <-first; p.err != nil || !slices.Equal(p.values, []string{"a", "b", "c"}) {
			t.Fatalf("first Poll: %v, %v", p.values, p.err)
		}

		second := pollAsync(context.Background(), c)
		synctest.Wait()
		if st.sent() != 2 {
			t.Fatalf("the second Poll sent a poll of its own (%d sent): it should take the one sent ahead", st.sent())
		}
		reply = st.replyHead(t, hn.fakeConsumerNode)
		synctest.Wait()
		st.finish(reply)
		if p := <-second; p.err != nil || !slices.Equal(p.values, []string{"d", "e", "f"}) {
			t.Fatalf("second Poll: %v, %v", p.values, p.err)
		}
		if got := st.position(t, 2); got != "offset 6" {
			t.Fatalf("the third poll starts at %s, want offset 6", got)
		}
	})
}

// TestConsumerDropsThePollSentAheadOfACorruptReply: the start of a reply
// looked fine and the next poll went ahead from where it said, but the
// reply's batches are corrupt. The consumer drops the poll sent ahead and
// reads again from where the corrupt reply started: nothing is skipped.
func TestConsumerDropsThePollSentAheadOfACorruptReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, hn := heldConsumer(t, 6)
		first, st, reply := firstPollHead(t, context.Background(), c, hn)
		reply[len(reply)-1] ^= 0xff // the last record's value: the batch checksum fails
		st.finish(reply)
		if p := <-first; p.err == nil || len(p.values) != 0 {
			t.Fatalf("a corrupt reply: Poll returned %v, %v; want an error and no records", p.values, p.err)
		}
		if st.sent() != 2 {
			t.Fatalf("%d polls sent on the first stream, want 2 (the poll sent ahead included)", st.sent())
		}

		again := pollAsync(context.Background(), c)
		synctest.Wait()
		if hn.streams() != 2 {
			t.Fatalf("%d streams opened, want 2: the first goes with the poll sent ahead", hn.streams())
		}
		nst := hn.stream(1)
		if got := nst.position(t, 0); got != "offset 0" {
			t.Fatalf("after the corrupt reply the consumer polls from %s, want offset 0 (where that reply started)", got)
		}
		reply = nst.replyHead(t, hn.fakeConsumerNode)
		synctest.Wait()
		nst.finish(reply)
		if p := <-again; p.err != nil || !slices.Equal(p.values, []string{"a", "b", "c"}) {
			t.Fatalf("Poll after the corrupt reply: %v, %v", p.values, p.err)
		}
	})
}

// TestConsumerKeepsThePollSentAheadWhenItsCallerStopsWaiting: Poll's
// context ends after the next poll was sent ahead and before the reply
// arrived. The next Poll returns that reply, the one after it the reply
// of the poll sent ahead: nothing is lost or read twice.
func TestConsumerKeepsThePollSentAheadWhenItsCallerStopsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, hn := heldConsumer(t, 9)
		ctx, cancel := context.WithCancel(context.Background())
		first, st, reply := firstPollHead(t, ctx, c, hn)
		cancel()
		if p := <-first; p.err == nil {
			t.Fatalf("Poll with an ended context returned %v without an error", p.values)
		}
		st.finish(reply)

		var got []string
		for range 2 {
			p := pollAsync(context.Background(), c)
			synctest.Wait()
			if st.open() {
				// The poll sent ahead is still open: answer it.
				r := st.replyHead(t, hn.fakeConsumerNode)
				synctest.Wait()
				st.finish(r)
			}
			res := <-p
			if res.err != nil {
				t.Fatal(res.err)
			}
			got = append(got, res.values...)
		}
		if want := []string{"a", "b", "c", "d", "e", "f"}; !slices.Equal(got, want) {
			t.Fatalf("records %v, want %v", got, want)
		}
	})
}
