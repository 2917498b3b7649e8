package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A node past its bounds answers busy with a retry-after: the producer
// waits the hinted time (and no more than twice it, with its jitter),
// sends again, and the record is written once; the busy answer is
// counted and reported to WithOnBusy.
func TestProducerWaitsTheNodesRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		n.busyRetryAfter = 2 * time.Second
		n.fault = func(k int, _ uint32) fault {
			if k == 0 {
				return faultBusy
			}
			return faultNone
		}
		var hints []time.Duration
		p := testProducer(t, n, 1, WithOnBusy(func(d time.Duration) { hints = append(hints, d) }))
		start := time.Now()
		done := make(chan error, 1)
		p.Produce(context.Background(), &Record{Value: []byte("a")}, func(_ *Record, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatalf("produce: %v", err)
		}
		took := time.Since(start)
		if took < 2*time.Second || took > 4*time.Second {
			t.Fatalf("acknowledged after %v: want the retry-after of 2s, plus at most as much again", took)
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := n.values(0); len(got) != 1 || got[0] != "a" {
			t.Fatalf("log %v, want [a]: no accepted record lost, none twice", got)
		}
		if st := p.Stats(); st.Busy != 1 {
			t.Fatalf("stats %+v, want one busy answer", st)
		}
		if len(hints) != 1 || hints[0] != 2*time.Second {
			t.Fatalf("WithOnBusy saw %v, want [2s]", hints)
		}
	})
}

// While the node answers busy, a producer does not resend at once: the
// records that arrive meanwhile wait, and leave together, in fewer
// requests than records, every one written once and in order.
func TestProducerPacesItselfWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode()
		n.busyRetryAfter = time.Second
		n.fault = func(k int, _ uint32) fault {
			if k < 3 {
				return faultBusy
			}
			return faultNone
		}
		p := testProducer(t, n, 1)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		const records = 50
		for i := range records {
			wg.Add(1)
			p.Produce(context.Background(), &Record{Value: []byte(fmt.Sprint(i))}, func(_ *Record, err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				wg.Done()
			})
			time.Sleep(100 * time.Millisecond) // a record every 100 ms, for 5 s
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := n.values(0)
		if len(got) != records {
			t.Fatalf("%d records written, want %d", len(got), records)
		}
		for i, v := range got {
			if v != fmt.Sprint(i) {
				t.Fatalf("record %d is %q: out of order", i, v)
			}
		}
		if n.requests >= records {
			t.Fatalf("%d produce requests for %d records: the busy answers did not slow the producer", n.requests, records)
		}
		if st := p.Stats(); st.Busy != 3 {
			t.Fatalf("stats %+v, want three busy answers", st)
		}
	})
}
