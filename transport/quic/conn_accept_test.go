package quic

import (
	"context"
	"errors"
	"testing"
)

// A connection's stream acceptor hears of a shutdown as soon as it
// begins, while the connection stays open for the replies still owed:
// the node stops taking new streams, and answers what it read.
func TestShutdownEndsAStreamAcceptorAtOnce(t *testing.T) {
	ts := newTestServer(t, Config{})
	ctx := testContext(t)
	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 4)
	replies := make(chan error, 1)
	if err := p.Send(ctx, frame("held"), func(_ []byte, err error) { replies <- err }); err != nil {
		t.Fatal(err)
	}

	sc, err := ts.ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sc.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	accepting := make(chan error, 1)
	go func() {
		_, err := sc.AcceptStream(ctx)
		accepting <- err
	}()

	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.ln.Shutdown(ctx) }()
	if err := wait(t, accepting, "the acceptor to hear of the shutdown"); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("AcceptStream during a shutdown: %v, want ErrServerClosed", err)
	}
	if err := sc.Context().Err(); err != nil {
		t.Fatalf("the connection ended with a reply still owed: %v", context.Cause(sc.Context()))
	}
	if _, err := sc.AcceptStream(ctx); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("AcceptStream after the shutdown began: %v, want ErrServerClosed", err)
	}

	if err := s.Reply(held, frame("answered")); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, replies, "the reply owed"); err != nil {
		t.Fatalf("the request in flight: %v", err)
	}
	_ = s.Close()
	if err := wait(t, shutdown, "Shutdown"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
