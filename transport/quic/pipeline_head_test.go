package quic

import (
	"bytes"
	"strings"
	"testing"
)

// A request sent with SendHead has its hook see the start of a large reply
// before the rest of it has even been sent: here the server sends the
// rest only once the client has seen the start. A reply no longer than
// the hook's length arrives whole, without the hook.
func TestPipelineShowsTheStartOfALargeReplyFirst(t *testing.T) {
	ts := newTestServer(t, Config{})
	seen := make(chan struct{})
	large := frame(strings.Repeat("x", 64<<10))
	ts.serve(t, func(s *Stream, r *Request) {
		if bodyOf(r.Frame) == "small" {
			_ = s.Reply(r, frame("ok"))
			return
		}
		if _, err := s.qs.Write(large[:100]); err != nil {
			t.Error(err)
			return
		}
		wait(t, seen, "the client to see the start of the reply")
		if _, err := s.qs.Write(large[100:]); err != nil {
			t.Error(err)
		}
	})
	p := pipeline(t, ts.dial(t, ClientConfig{}), 2)

	const headLen = 64
	type result struct {
		head, reply []byte
	}
	send := func(body string) result {
		var res result
		done := make(chan struct{})
		err := p.SendHead(testContext(t), frame(body), headLen, func(start []byte) {
			res.head = bytes.Clone(start)
			close(seen)
		}, func(reply []byte, err error) {
			if err != nil {
				t.Error(err)
			}
			res.reply = reply
			close(done)
		})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, done, "the reply to "+body)
		return res
	}

	res := send("large")
	if !bytes.Equal(res.head, large[:headLen]) {
		t.Fatalf("the hook saw %d bytes %q..., want the reply's first %d", len(res.head), res.head[:min(len(res.head), 16)], headLen)
	}
	if !bytes.Equal(res.reply, large) {
		t.Fatalf("the reply has %d bytes, want the whole frame of %d", len(res.reply), len(large))
	}
	if res = send("small"); res.head != nil || bodyOf(res.reply) != "ok" {
		t.Fatalf("a small reply: hook saw %q, reply %q; want no hook and the reply", res.head, res.reply)
	}
}
