package quic

import (
	"context"
	"errors"
	"io"
	"testing"
)

// CloseSend returns at once, refuses later requests, lets the request in
// flight get its reply, and only then ends the stream: the server reads
// the end after answering, and both sides' goroutines for the stream end,
// with no reset on the way.
func TestCloseSendEndsTheStreamAfterTheLastReply(t *testing.T) {
	ts := newTestServer(t, Config{})
	release := make(chan struct{})
	ended := make(chan error, 1)
	ctx := testContext(t)
	go func() {
		c, err := ts.ln.Accept(ctx)
		if err != nil {
			ended <- err
			return
		}
		s, err := c.AcceptStream(ctx)
		if err != nil {
			ended <- err
			return
		}
		for {
			r, err := s.ReadFrame()
			if err != nil {
				_ = s.Close()
				ended <- err
				return
			}
			<-release // the reply is held until the client has called CloseSend
			_ = s.Reply(r, frame("echo:"+bodyOf(r.Frame)))
		}
	}()
	p := pipeline(t, ts.dial(t, ClientConfig{}), 4)

	replies := make(chan error, 1)
	if err := p.Send(ctx, frame("held"), func(reply []byte, err error) {
		if err == nil && bodyOf(reply) != "echo:held" {
			err = errors.New("reply " + bodyOf(reply))
		}
		replies <- err
	}); err != nil {
		t.Fatal(err)
	}
	p.CloseSend()
	if err := p.Send(ctx, frame("late"), func([]byte, error) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a Send after CloseSend: %v, want ErrClosed", err)
	}

	close(release)
	if err := wait(t, replies, "the reply to the request in flight"); err != nil {
		t.Fatalf("the request in flight: %v", err)
	}
	if err := wait(t, ended, "the server to read the stream's end"); err != io.EOF {
		t.Fatalf("the server's read ended with %v, want io.EOF (the client's FIN)", err)
	}
	wait(t, p.readerDone, "the pipeline's reader to end")
	wait(t, p.writerDone, "the pipeline's writer to end")
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("Close after CloseSend: %v", err)
	}
}

// With nothing in flight, CloseSend ends the stream at once: the server,
// which ends its side once it reads the client's end, ends the
// pipeline's reader.
func TestCloseSendOnAnIdleStream(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	p := pipeline(t, ts.dial(t, ClientConfig{}), 4)
	mustEcho(t, p, "one")
	p.CloseSend()
	wait(t, p.readerDone, "the pipeline's reader to end")
	wait(t, p.writerDone, "the pipeline's writer to end")
}
