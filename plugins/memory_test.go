package plugins

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// growParams makes the hostile plugin hold mib MiB per call.
func growParams(mib int) Params { return Params{"do": "grow", "mib": fmt.Sprint(mib)} }

// A plugin holding memory gives it back: an idle instance after
// IdleTimeout, a removed plugin's at once. What the host charges to its
// budget goes back to zero.
func TestMemoryGivenBack(t *testing.T) {
	clock := newTestClock()
	h := newTestHost(t, Config{Now: clock.Now, IdleTimeout: time.Minute})
	mustAdd(t, h, "hungry", KindFilter, goModule(t, hostilePkg))
	v := hostileView3(t)
	ctx := context.Background()

	if _, err := h.Filter(ctx, "hungry", growParams(16), v); err != nil {
		t.Fatal(err)
	}
	if u := h.Memory(); u.Used < 16<<20 || u.Idle != 1 {
		t.Fatalf("after a call holding 16 MiB: %+v", u)
	}

	clock.Advance(time.Minute - time.Second)
	h.reapIdle()
	if u := h.Memory(); u.Idle != 1 {
		t.Fatalf("an instance idle for less than IdleTimeout was closed: %+v", u)
	}
	clock.Advance(time.Second)
	h.reapIdle()
	if u := h.Memory(); u.Used != 0 || u.Instances != 0 {
		t.Fatalf("after IdleTimeout idle: %+v, want nothing held", u)
	}

	if _, err := h.Filter(ctx, "hungry", growParams(16), v); err != nil {
		t.Fatal(err)
	}
	if u := h.Memory(); u.Used < 16<<20 {
		t.Fatalf("after a second call: %+v", u)
	}
	if err := h.Remove("hungry"); err != nil {
		t.Fatal(err)
	}
	if u := h.Memory(); u.Used != 0 || u.Instances != 0 {
		t.Fatalf("after removal: %+v, want nothing held", u)
	}
}

// A guest growing its memory past the limit of one instance sees
// memory.grow fail inside the call; the call fails saying so, counts a
// strike, and its instance's memory is given back.
func TestMemoryGrowthPastTheLimitFailsTheCall(t *testing.T) {
	h := newTestHost(t, Config{MaxInstanceMemory: 16 << 20, MemoryBudget: 256 << 20})
	mustAdd(t, h, "hungry", KindFilter, goModule(t, hostilePkg))
	_, err := h.Filter(context.Background(), "hungry", growParams(32), hostileView3(t))
	expectErr(t, err, ErrMemoryLimit, `"hungry" grew its memory past 16 MiB, the limit of one instance; ledge_filter then failed`)
	if !strings.Contains(err.Error(), "out of memory") {
		t.Errorf("error %q does not carry the guest's own report", err)
	}
	info, _ := h.Stat("hungry")
	if info.Stats.Strikes != 1 || info.Stats.MemoryLimits != 1 {
		t.Errorf("stats %+v, want one strike and one memory limit failure", info.Stats)
	}
	if u := h.Memory(); u.Used != 0 || u.Instances != 0 {
		t.Errorf("after the failed call: %+v, want its instance closed", u)
	}
}

// Growth past what the node-wide budget has left fails inside the guest
// too, as a budget refusal: retryable, and not held against the plugin.
func TestMemoryGrowthPastTheBudgetFailsTheCall(t *testing.T) {
	h := newTestHost(t, Config{MaxInstanceMemory: 64 << 20, MemoryBudget: 16 << 20})
	mustAdd(t, h, "hungry", KindFilter, goModule(t, hostilePkg))
	_, err := h.Filter(context.Background(), "hungry", growParams(24), hostileView3(t))
	expectErr(t, err, ErrMemoryBudget, `"hungry" could not grow its memory to`)
	if errors.Is(err, ErrMemoryLimit) || errors.Is(err, ErrTrap) {
		t.Errorf("a budget refusal reads as the plugin's fault: %v", err)
	}
	info, _ := h.Stat("hungry")
	if info.Stats.Strikes != 0 || info.Stats.MemoryBudget != 1 {
		t.Errorf("stats %+v, want no strike and one budget failure", info.Stats)
	}
	if u := h.Memory(); u.Peak > u.Budget {
		t.Errorf("memory %+v: peak over the budget", u)
	}
}

// Concurrent calls of several memory-hungry plugins never hold more than
// the budget together: instances start and grow only within what is
// left, idle ones are closed to make room, and a call that cannot grow
// fails with ErrMemoryBudget.
func TestMemoryBudgetHoldsUnderConcurrentCalls(t *testing.T) {
	const budget = 48 << 20
	h := newTestHost(t, Config{MaxInstanceMemory: 32 << 20, MemoryBudget: budget, MaxConcurrentCalls: 4, MaxInstances: 2})
	wasm := goModule(t, hostilePkg)
	for i := range 4 {
		mustAdd(t, h, fmt.Sprint("hungry-", i), KindFilter, wasm)
	}
	v := hostileView3(t)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok       int
		failures []error
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				_, err := h.Filter(context.Background(), fmt.Sprint("hungry-", (g+i)%4), growParams(12), v)
				mu.Lock()
				if err == nil {
					ok++
				} else {
					failures = append(failures, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range failures {
		if !errors.Is(err, ErrMemoryBudget) {
			t.Errorf("call failed with %v, want only budget refusals", err)
		}
	}
	u := h.Memory()
	if u.Peak > budget || u.Used > budget {
		t.Fatalf("memory %+v: over the budget of %d MiB", u, budget>>20)
	}
	if ok == 0 {
		t.Fatalf("no call succeeded (%d refused)", len(failures))
	}
	t.Logf("%d calls succeeded, %d refused; peak %d MiB of %d", ok, len(failures), u.Peak>>20, budget>>20)
}
