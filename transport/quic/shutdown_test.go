package quic

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestShutdownFinishesInFlightRequest(t *testing.T) {
	ts := newTestServer(t, Config{})
	got := make(chan string, 4)
	ts.serve(t, func(s *Stream, r *Request) {
		if bodyOf(r.Frame) == "in flight" {
			got <- bodyOf(r.Frame)
			// Answer only once the shutdown has begun: the request is in
			// flight across it.
			<-ts.ln.Draining()
		}
		echo(s, r)
	})
	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 4)
	replies := make(chan error, 2)
	send := func(body string) {
		err := p.Send(testContext(t), frame(body), func(reply []byte, err error) {
			if err == nil && bodyOf(reply) != "echo:"+body {
				err = errors.New("wrong reply " + bodyOf(reply))
			}
			replies <- err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	send("in flight")
	// Sent while the handler holds the first one: the server never reads it.
	send("too late")
	if b := wait(t, got, "the first request"); b != "in flight" {
		t.Fatalf("server read %q", b)
	}

	// A connection whose only stream has ended.
	idle := ts.dial(t, ClientConfig{})
	ip := pipeline(t, idle, 1)
	if _, err := ip.Do(testContext(t), frame("x")); err != nil {
		t.Fatal(err)
	}
	if err := ip.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.ln.Shutdown(testContext(t)) }()

	if err := wait(t, replies, "the in-flight reply"); err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	err := wait(t, replies, "the second request's outcome")
	if !errors.Is(err, ErrNotProcessed) || !IsRetryable(err) {
		t.Fatalf("request sent during the shutdown: err = %v, want a retryable ErrNotProcessed", err)
	}
	if err := wait(t, shutdown, "Shutdown"); err != nil {
		t.Errorf("Shutdown: %v (the client confirmed every reply; it should finish cleanly)", err)
	}
	wait(t, c.Context().Done(), "the connection to close")
	if err := c.Err(); !errors.Is(err, ErrServerClosed) {
		t.Errorf("connection closed with %v, want ErrServerClosed", err)
	}
	wait(t, idle.Context().Done(), "the idle connection to close")
	if err := idle.Err(); !errors.Is(err, ErrServerClosed) {
		t.Errorf("idle connection closed with %v, want ErrServerClosed", err)
	}
	// Nothing listens any more; over UDP the client only learns it from
	// its own timeout.
	short, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
	defer cancel()
	if _, err := Dial(short, ts.addr(), ts.clientTLS(), ClientConfig{}); err == nil {
		t.Error("Dial after Shutdown succeeded")
	}
	if _, err := ts.ln.Accept(context.Background()); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Accept after Shutdown: %v", err)
	}
}

func TestShutdownDeadline(t *testing.T) {
	// A handler that never answers cannot hold the shutdown past its
	// context.
	ts := newTestServer(t, Config{})
	got := make(chan struct{}, 1)
	ts.serve(t, func(s *Stream, r *Request) {
		got <- struct{}{}
		<-s.Conn().Context().Done()
	})
	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 1)
	result := make(chan error, 1)
	if err := p.Send(testContext(t), frame("stuck"), func(_ []byte, err error) { result <- err }); err != nil {
		t.Fatal(err)
	}
	wait(t, got, "the request")
	ctx, cancel := context.WithCancel(testContext(t))
	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.ln.Shutdown(ctx) }()
	<-ts.ln.Draining()
	cancel()
	if err := wait(t, shutdown, "Shutdown"); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v, want context.Canceled", err)
	}
	if err := wait(t, result, "the request's outcome"); !errors.Is(err, ErrServerClosed) {
		t.Errorf("unanswered request: %v, want ErrServerClosed", err)
	}
	if s := ts.ln.Stats(); s.BudgetInUse != 0 {
		t.Errorf("%d budget bytes still held after close", s.BudgetInUse)
	}
}
