package plugins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkMemoryHungryPlugins runs twelve filters that each grow to the
// instance limit (64 MiB) under the default budget (512 MiB): one after
// another, then all at once, some holding their memory and some growing
// until refused. It samples the process's resident memory throughout and
// reports the peak over the budget. It then waits for the idle instances
// to time out, removes the plugins, waits IdleTimeout again, and reports
// how far the resident memory is, each time, from where it was before the
// plugins were added.
//
//	go test ./plugins -run '^$' -bench MemoryHungryPlugins -benchtime 1x
//
// It takes about 75 s (the idle waits are real) and needs /proc (Linux).
func BenchmarkMemoryHungryPlugins(b *testing.B) {
	if _, ok := residentBytes(); !ok {
		b.Skip("no /proc/self/statm")
	}
	const (
		plugins = 12
		idle    = 30 * time.Second
	)
	wasm := goModule(b, hostilePkg)
	h := newTestHost(b, Config{Now: time.Now, MaxStrikes: 1 << 20, IdleTimeout: idle, CallTimeout: 5 * time.Second})
	budget := h.cfg.MemoryBudget
	v := hostileView3(b)
	ctx := context.Background()
	// A plugin holding 56 MiB of slices grows its memory to the 64 MiB
	// limit (the Go runtime's own memory on top).
	hold := Params{"do": "grow", "mib": "56"}
	bomb := Params{"do": "alloc"}

	runtime.GC()
	before, _ := residentBytes()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, ok := residentBytes(); ok && rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()

	b.ResetTimer()
	var ok, refused, limited atomic.Int64
	count := func(err error) {
		switch {
		case err == nil:
			ok.Add(1)
		case errors.Is(err, ErrMemoryBudget):
			refused.Add(1)
		case errors.Is(err, ErrMemoryLimit):
			limited.Add(1)
		default:
			b.Error(err)
		}
	}
	for range b.N {
		for i := range plugins {
			mustAdd(b, h, fmt.Sprint("hungry-", i), KindFilter, wasm)
		}
		for i := range plugins {
			_, err := h.Filter(ctx, fmt.Sprint("hungry-", i), hold, v)
			count(err)
		}
		var wg sync.WaitGroup
		for i := range plugins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 3 {
					params := hold
					if (i+j)%3 == 0 {
						params = bomb
					}
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					_, err := h.Filter(cctx, fmt.Sprint("hungry-", i), params, v)
					cancel()
					count(err)
				}
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	close(stop)
	<-sampled
	held, _ := residentBytes()
	mem := h.Memory()
	// Idle instances close after IdleTimeout; the plugins stay.
	time.Sleep(idle + giveBackDelay + time.Second)
	idleRSS, _ := residentBytes()
	idleMem := h.Memory()
	for i := range plugins {
		if err := h.Remove(fmt.Sprint("hungry-", i)); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(idle)
	after, _ := residentBytes()
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	b.ReportMetric(mib(peak.Load()), "peak-rss-MiB")
	b.ReportMetric(mib(peak.Load()-budget), "peak-over-budget-MiB")
	b.ReportMetric(mib(mem.Peak), "peak-plugin-MiB")
	b.ReportMetric(mib(idleRSS-before), "rss-idle-delta-MiB")
	b.ReportMetric(mib(after-before), "rss-removed-delta-MiB")
	b.Logf("RSS before %.0f MiB, peak %.0f MiB (budget %.0f MiB, plugins' peak %.0f MiB); after the calls %.0f MiB (plugins hold %.0f MiB in %d idle instances); "+
		"after %v idle %.0f MiB (%d instances); after removal and %v idle %.0f MiB; calls: %d succeeded, %d refused by the budget, %d past the instance limit",
		mib(before), mib(peak.Load()), mib(budget), mib(mem.Peak), mib(held), mib(mem.Used), mem.Idle,
		idle, mib(idleRSS), idleMem.Instances, idle, mib(after), ok.Load(), refused.Load(), limited.Load())
}

// residentBytes returns the process's resident memory, from /proc.
func residentBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}
