package plugins

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// heldWorkers are all of a host's workers, taken by the test as calls
// running elsewhere would hold them.
type heldWorkers struct {
	h  *Host
	p  *plugin
	ws []*worker
}

func holdWorkers(t *testing.T, h *Host) *heldWorkers {
	t.Helper()
	held := &heldWorkers{h: h, p: &plugin{name: "elsewhere"}}
	for range h.cfg.MaxConcurrentCalls {
		w, err := h.pool.take(context.Background(), held.p, nil)
		if err != nil {
			t.Fatal(err)
		}
		held.ws = append(held.ws, w)
	}
	return held
}

func (held *heldWorkers) release() {
	for _, w := range held.ws {
		held.h.pool.put(w, held.p, 0)
	}
	held.ws = nil
}

// A call's deadline starts when it gets a worker: a call that queued
// behind busy workers for ten times its deadline then runs with the whole
// of it, and answers; nothing is held against its plugin.
func TestQueuedCallsDeadlineStartsWhenItRuns(t *testing.T) {
	clock := newTestClock()
	h := newTestHost(t, Config{Now: clock.Now, MaxConcurrentCalls: 1})
	mustAdd(t, h, "ok", KindFilter, goModule(t, hostilePkg))
	v := hostileView3(t)

	held := holdWorkers(t, h)
	done := make(chan error, 1)
	go func() {
		_, err := h.Filter(context.Background(), "ok", Params{"do": "ok"}, v)
		done <- err
	}()
	queued(t, h, "ok", 1)
	clock.Advance(10 * h.cfg.CallTimeout)
	held.release()
	if err := <-done; err != nil {
		t.Fatalf("the call that queued past its deadline: %v, want its answer", err)
	}
	if st, _ := h.Stat("ok"); st.Stats.Calls != 1 || st.Stats.Timeouts != 0 || st.Stats.Strikes != 0 {
		t.Fatalf("after the queued call: %+v, want one call, no timeout, no strike", st.Stats)
	}
}

// A call whose caller gives up before it gets a worker fails as busy
// (ErrBusy, and the context's error): none of its plugin's code ran, so
// however often that happens nothing is held against the plugin, and its
// instance is kept. Once a worker is free, the plugin serves.
func TestStarvedCallsAreBusyNotStrikes(t *testing.T) {
	h := newTestHost(t, Config{MaxConcurrentCalls: 1, MaxStrikes: 2})
	mustAdd(t, h, "ok", KindFilter, goModule(t, hostilePkg))
	v := hostileView3(t)
	started := func() uint64 { st, _ := h.Stat("ok"); return st.Stats.Instantiations }
	before := started()

	held := holdWorkers(t, h)
	for range 5 { // more than MaxStrikes
		ctx, cancel := context.WithDeadline(context.Background(), time.Now()) // its wait is over
		_, err := h.Filter(ctx, "ok", Params{"do": "ok"}, v)
		cancel()
		if !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) ||
			!strings.Contains(err.Error(), "waiting for one of the 1 plugin workers") {
			t.Fatalf("a call that never got a worker: %v, want plugin busy", err)
		}
	}
	st, _ := h.Stat("ok")
	if st.Stats.Quarantined || st.Stats.Strikes != 0 || st.Stats.Failures != 0 || st.Stats.Calls != 0 {
		t.Fatalf("after five starved calls: %+v, want nothing held against the plugin", st.Stats)
	}
	if n := started(); n != before {
		t.Fatalf("the starved calls started %d instances, want the idle one kept", n-before)
	}

	held.release()
	if _, err := h.Filter(context.Background(), "ok", Params{"do": "ok"}, v); err != nil {
		t.Fatalf("a call once a worker is free: %v", err)
	}
}

// expiringCtx is a context whose deadline passes when the test says,
// whatever the wall clock: Deadline reports when it is due.
type expiringCtx struct {
	context.Context
	due  time.Time
	done chan struct{}
	once sync.Once
}

func newExpiringCtx(due time.Time) *expiringCtx {
	return &expiringCtx{Context: context.Background(), due: due, done: make(chan struct{})}
}

func (c *expiringCtx) Deadline() (time.Time, bool) { return c.due, true }
func (c *expiringCtx) Done() <-chan struct{}       { return c.done }
func (c *expiringCtx) expire()                     { c.once.Do(func() { close(c.done) }) }
func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// A guest checked late, as on a machine that did not run its thread for
// a while, can be found past both its call's deadline and its caller's:
// the one that passed first says what happened. Past its own first, the
// plugin timed out, with a strike, as a looping plugin does; past the
// caller's first, the caller abandoned the call, and nothing is held
// against the plugin.
func TestCallPastBothDeadlinesIsJudgedByTheFirst(t *testing.T) {
	for _, c := range []struct {
		name                       string
		callTimeout, callerTimeout time.Duration
		timedOut                   bool
	}{
		{"its own deadline first", time.Second, time.Hour, true},
		{"the caller's deadline first", time.Hour, time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := newExpiringCtx(time.Now().Add(c.callerTimeout))
			// Once armed, the guest's next look at the clock finds both
			// deadlines past at once.
			clock := newTestClock()
			var armed atomic.Bool
			now := func() time.Time {
				if armed.CompareAndSwap(true, false) {
					ctx.expire()
					clock.Advance(24 * time.Hour)
				}
				return clock.Now()
			}
			logs := &logSink{}
			h := newTestHost(t, Config{Now: now, CallTimeout: c.callTimeout, Logger: slogNew(logs)})
			mustAdd(t, h, "loop", KindFilter, goModule(t, hostilePkg))
			v := hostileView3(t)

			spinning := logs.wait("INFO spinning")
			errc := make(chan error, 1)
			go func() { _, err := h.Filter(ctx, "loop", Params{"do": "spin"}, v); errc <- err }()
			<-spinning
			armed.Store(true)
			err := <-errc
			st, _ := h.Stat("loop")
			if c.timedOut {
				if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "ran past its deadline of 1s") || st.Stats.Strikes != 1 {
					t.Fatalf("%v, %d strikes; want a timeout and a strike", err, st.Stats.Strikes)
				}
				return
			}
			if errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
				!strings.Contains(err.Error(), "abandoned by its caller") || st.Stats.Strikes != 0 {
				t.Fatalf("%v, %d strikes; want the call abandoned by its caller and no strike", err, st.Stats.Strikes)
			}
		})
	}
}
