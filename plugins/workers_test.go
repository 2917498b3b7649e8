package plugins

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Guest code runs on at most MaxConcurrentCalls workers: while a guest
// spins on the only one, another plugin's call queues without running,
// and runs once the spinner is cut off.
func TestWorkersBoundConcurrentCalls(t *testing.T) {
	clock := newTestClock()
	logs := &logSink{}
	h := newTestHost(t, Config{Now: clock.Now, Logger: slogNew(logs), MaxConcurrentCalls: 1})
	wasm := goModule(t, hostilePkg)
	mustAdd(t, h, "spin", KindFilter, wasm)
	mustAdd(t, h, "ok", KindFilter, wasm)
	v := hostileView3(t)

	spinning := logs.wait("spinning")
	spun := make(chan error, 1)
	go func() {
		_, err := h.Filter(context.Background(), "spin", Params{"do": "spin"}, v)
		spun <- err
	}()
	<-spinning

	// A call whose caller gives up while it queues never reached its guest.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := h.Filter(ctx, "ok", Params{"do": "ok"}, v)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for one of the 1 plugin workers") {
		t.Fatalf("queued call: %v, want it canceled while waiting for a worker", err)
	}
	if info, _ := h.Stat("ok"); info.Stats.Calls != 0 || info.Stats.Strikes != 0 {
		t.Fatalf("the queued call ran or was held against its plugin: %+v", info.Stats)
	}

	queued := make(chan error, 1)
	go func() {
		_, err := h.Filter(context.Background(), "ok", Params{"do": "ok"}, v)
		queued <- err
	}()
	clock.Advance(time.Hour) // past the spinner's deadline
	if err := <-spun; !errors.Is(err, ErrTimeout) {
		t.Fatalf("spinner: %v, want a timeout", err)
	}
	if err := <-queued; err != nil {
		t.Fatalf("queued call after the spinner: %v", err)
	}
	if info, _ := h.Stat("ok"); info.Stats.Calls != 1 {
		t.Fatalf("ok plugin: %d calls, want 1", info.Stats.Calls)
	}

	// The spinner's calls now run on the workers' lower-priority threads
	// (where the kernel has them); the quick plugin's stay on the caller's.
	h.mu.Lock()
	spinSlow, okSlow := h.plugins["spin"].slow.Load(), h.plugins["ok"].slow.Load()
	h.mu.Unlock()
	if !spinSlow || okSlow {
		t.Fatalf("slow plugins: spin %v, ok %v; want only spin", spinSlow, okSlow)
	}
	if _, err := h.Filter(context.Background(), "spin", Params{"do": "ok"}, v); err != nil {
		t.Fatalf("a call of the slow plugin: %v", err)
	}
}

// The workers go to plugins in turn, not to calls in their order of
// arrival: with the only worker held by a looping call and three more
// calls of the looping plugin queued before one call of another plugin,
// the other plugin's call runs as soon as the loop is cut off, before
// any of the queued loops.
func TestWorkersTakeTurnsBetweenPlugins(t *testing.T) {
	clock := newTestClock()
	logs := &logSink{}
	h := newTestHost(t, Config{Now: clock.Now, Logger: slogNew(logs), MaxConcurrentCalls: 1, MaxInstances: 8})
	wasm := goModule(t, hostilePkg)
	mustAdd(t, h, "spin", KindFilter, wasm)
	mustAdd(t, h, "ok", KindFilter, wasm)
	v := hostileView3(t)
	if _, err := h.Filter(context.Background(), "spin", Params{"do": "ok"}, v); err != nil {
		t.Fatalf("a quick call of the looping plugin: %v", err)
	}

	spinning := logs.wait("spinning")
	spun := make(chan error, 4)
	spin := func() {
		_, err := h.Filter(context.Background(), "spin", Params{"do": "spin"}, v)
		spun <- err
	}
	go spin()
	<-spinning
	for range 3 {
		go spin()
	}
	queued(t, h, "spin", 3)
	done := make(chan error, 1)
	go func() {
		_, err := h.Filter(context.Background(), "ok", Params{"do": "ok"}, v)
		done <- err
	}()
	queued(t, h, "ok", 1)

	clock.Advance(time.Hour) // past the first loop's deadline
	if err := <-spun; !errors.Is(err, ErrTimeout) {
		t.Fatalf("first loop: %v, want a timeout", err)
	}
	// The worker goes to one of the four calls waiting for it: the other
	// plugin's. (The loop running then would spin until the clock moves.)
	h.mu.Lock()
	spinP, okP := h.plugins["spin"], h.plugins["ok"]
	h.mu.Unlock()
	for {
		loops, others := h.pool.waitingFor(spinP), h.pool.waitingFor(okP)
		if loops+others == 4 {
			runtime.Gosched()
			continue
		}
		if others != 0 {
			t.Fatalf("the worker went to a queued loop (%d left waiting), not to the other plugin's call", loops)
		}
		break
	}
	if err := <-done; err != nil {
		t.Fatalf("the other plugin's call: %v", err)
	}
	// The queued loops run next, each cut at its own deadline.
	for cut := 0; cut < 3; {
		select {
		case err := <-spun:
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("queued loop: %v, want a timeout", err)
			}
			cut++
		default:
			clock.Advance(time.Hour)
			runtime.Gosched()
		}
	}
}

// queued waits until n guest entries of plugin name wait for a worker.
func queued(t *testing.T, h *Host, name string, n int) {
	t.Helper()
	h.mu.Lock()
	p := h.plugins[name]
	h.mu.Unlock()
	for h.pool.waitingFor(p) < n {
		runtime.Gosched()
	}
}

// A program running a host gives the workers Go processors of their own,
// on top of those its own code has.
func TestProcessorsAddTheWorkers(t *testing.T) {
	for _, c := range []struct {
		workers, procs         int
		wantWorkers, wantProcs int
	}{
		{0, 2, 1, 3}, // default: one less than the processors
		{0, 1, 1, 2}, // and at least one
		{0, 8, 7, 15},
		{3, 8, 3, 11}, // configured
	} {
		cfg, procs := Processors(Config{MaxConcurrentCalls: c.workers}, c.procs)
		if cfg.MaxConcurrentCalls != c.wantWorkers || procs != c.wantProcs {
			t.Errorf("%d workers on %d processors: %d workers, GOMAXPROCS %d; want %d and %d",
				c.workers, c.procs, cfg.MaxConcurrentCalls, procs, c.wantWorkers, c.wantProcs)
		}
	}
}
