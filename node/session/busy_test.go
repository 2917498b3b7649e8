package session_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/node/session"
)

// A full node answers busy, with a retry-after, and holds no more: the
// produce request past the bound takes no place, and one place given
// back admits the next.
func TestShedderBoundsRequestsInFlight(t *testing.T) {
	s := session.NewShedder(session.ShedConfig{MaxRequests: 2, DelayTarget: -1, RetryAfter: 300 * time.Millisecond})
	for range 2 {
		if err := s.Admit(100); err != nil {
			t.Fatalf("admit below the bound: %v", err)
		}
	}
	busy := s.Admit(100)
	if busy == nil || !errors.Is(busy, session.ErrBusy) {
		t.Fatalf("third request: got %v, want busy", busy)
	}
	if busy.Reason != session.ShedRequests || busy.RetryAfter != 300*time.Millisecond {
		t.Fatalf("got %+v, want shed on requests, retry after 300ms", busy)
	}
	if st := s.Stats(); st.Requests != 2 || st.Bytes != 200 || st.Shed["requests"] != 1 {
		t.Fatalf("stats %+v: the shed request took a place", st)
	}
	s.Release(100)
	if err := s.Admit(100); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

// The bytes in flight are bounded too, though one request alone is
// always admitted whatever its size.
func TestShedderBoundsBytesInFlight(t *testing.T) {
	s := session.NewShedder(session.ShedConfig{MaxBytes: 1000, DelayTarget: -1})
	if err := s.Admit(4000); err != nil {
		t.Fatalf("one request alone: %v", err)
	}
	if busy := s.Admit(1); busy == nil || busy.Reason != session.ShedBytes {
		t.Fatalf("past the bytes: got %v, want shed on bytes", busy)
	}
	s.Release(4000)
	if err := s.Admit(600); err != nil {
		t.Fatal(err)
	}
	if err := s.Admit(400); err != nil {
		t.Fatalf("up to the bound: %v", err)
	}
}

// The story of an overload: the queueing delay goes past its target; for
// one interval nothing is shed (a short stall is not a queue); then a
// growing share of produce requests is answered busy, with a retry-after
// of twice the delay; once the delay is back below the target, the share
// falls back to none and every request is admitted again.
func TestShedderShedsOnQueueingDelay(t *testing.T) {
	now := time.Unix(0, 0)
	s := session.NewShedder(session.ShedConfig{
		DelayTarget: 100 * time.Millisecond, Interval: 100 * time.Millisecond,
		RetryAfter: 500 * time.Millisecond, Now: func() time.Time { return now },
	})
	observe := func(d time.Duration) {
		s.ObserveDelay(d)
		now = now.Add(50 * time.Millisecond)
	}
	shedOf := func(n int) (shed int, hint time.Duration) {
		for range n {
			if busy := s.Admit(10); busy != nil {
				shed++
				hint = busy.RetryAfter
				continue
			}
			s.Release(10)
		}
		return shed, hint
	}

	observe(20 * time.Millisecond)
	if shed, _ := shedOf(100); shed != 0 {
		t.Fatalf("below the target: %d of 100 shed", shed)
	}
	observe(400 * time.Millisecond)
	observe(400 * time.Millisecond)
	if shed, _ := shedOf(100); shed != 0 {
		t.Fatalf("above the target for less than an interval: %d of 100 shed", shed)
	}
	observe(400 * time.Millisecond) // an interval above it
	if shed, hint := shedOf(100); shed != 10 || hint != 800*time.Millisecond {
		t.Fatalf("an interval above the target: %d of 100 shed, retry after %v; want 10, 800ms", shed, hint)
	}
	for range 20 {
		observe(3 * time.Second)
	}
	if shed, hint := shedOf(100); shed != 90 || hint != 6*time.Second {
		t.Fatalf("long above the target: %d of 100 shed, retry after %v; want 90 (never all), 6s", shed, hint)
	}
	for range 10 {
		observe(time.Millisecond)
	}
	if shed, _ := shedOf(100); shed != 0 {
		t.Fatalf("back below the target: %d of 100 shed", shed)
	}
	if st := s.Stats(); st.Shed["delay"] != 100 || st.Requests != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A wait ahead of the node's goroutines (the UDP socket's, which the
// scheduler's latency does not show) counts as queueing delay: while the
// socket's wait stands past the target, Run sheds a growing share of
// produce requests, with a retry-after of twice that wait, and names the
// part in the stats; once it falls, the share falls back to none.
func TestShedderShedsOnTheSocketsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := session.NewShedder(session.ShedConfig{})
		var wait atomic.Int64 // the socket's wait, as the transport would measure it
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Run(ctx, session.DelaySource{Name: "socket", Measure: func() time.Duration { return time.Duration(wait.Load()) }})
		}()
		shedOf := func(n int) (shed int, hint time.Duration) {
			for range n {
				if busy := s.Admit(10); busy != nil {
					shed++
					hint = busy.RetryAfter
					continue
				}
				s.Release(10)
			}
			return shed, hint
		}

		time.Sleep(time.Second)
		synctest.Wait()
		if shed, _ := shedOf(100); shed != 0 {
			t.Fatalf("no wait in the socket: %d of 100 shed", shed)
		}
		wait.Store(int64(400 * time.Millisecond))
		time.Sleep(time.Second)
		synctest.Wait()
		st := s.Stats()
		if st.Delays["socket"] != 400*time.Millisecond || st.Delay < 400*time.Millisecond {
			t.Fatalf("stats %+v: the socket's wait is not the delay", st)
		}
		if _, ok := st.Delays["scheduler"]; !ok {
			t.Fatalf("stats %+v: no scheduler part", st)
		}
		if shed, hint := shedOf(100); shed != 90 || hint != 800*time.Millisecond {
			t.Fatalf("a second of the socket's wait at 400ms: %d of 100 shed, retry after %v; want 90, 800ms", shed, hint)
		}
		wait.Store(0)
		time.Sleep(time.Second)
		synctest.Wait()
		if shed, _ := shedOf(100); shed != 0 {
			t.Fatalf("the socket drained: %d of 100 shed", shed)
		}
		cancel()
		<-done
	})
}
