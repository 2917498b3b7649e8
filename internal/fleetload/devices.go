package fleetload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// connect sets up every device, p.Dialers at a time, and times it. A
// device that fails to connect is nil in the result and counts as an
// error.
func (r *run) connect(ctx context.Context, sys System) []Device {
	devs := make([]Device, r.p.Devices)
	next := make(chan int)
	var wg sync.WaitGroup
	s0, known := nodeSetup(ctx, sys)
	t0 := time.Now()
	for range r.p.Dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d, err := sys.Device(ctx, i)
				if err != nil {
					r.fail(fmt.Errorf("device %d: connect: %w", i, err))
					continue
				}
				devs[i] = d
			}
		}()
	}
	for i := range devs {
		next <- i
	}
	close(next)
	wg.Wait()
	r.res.Setup = time.Since(t0)
	if s1, ok := nodeSetup(ctx, sys); ok && known {
		r.res.SetupNode, r.res.SetupKnown = s1.Sub(s0), true
	}
	for _, d := range devs {
		if d != nil {
			r.res.Connected++
		}
	}
	return devs
}

// nodeSetup reads sys's node's set-up counters, if it says.
func nodeSetup(ctx context.Context, sys System) (SetupStats, bool) {
	sc, ok := sys.(SetupCounter)
	if !ok {
		return SetupStats{}, false
	}
	s, ok, err := sc.NodeSetup(ctx)
	return s, ok && err == nil
}

func closeAll(devs []Device) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, d := range devs {
		if d == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_ = d.Close()
		}()
	}
	wg.Wait()
}

// listen holds device i's long poll until ctx ends, counting the
// commands meant for it that were written in the window.
func (r *run) listen(ctx context.Context, i int, d Device) {
	err := d.Commands(ctx, func(b []byte) {
		to, at, ok := DecodeCommand(b)
		if !ok || to != i || !r.inWindow(at) {
			return
		}
		r.res.Command.add(time.Since(at))
		r.cmdGot.Add(1)
	})
	if err != nil && ctx.Err() == nil {
		r.fail(fmt.Errorf("device %d: commands: %w", i, err))
	}
}

// produce sends device i's records on its schedule: a random phase, then
// gaps of Interval·(1 ± Jitter). A record's latency runs from the time it
// was scheduled, so a device that falls behind counts its lateness.
func (r *run) produce(ctx context.Context, i int, d Device, start time.Time) {
	rng := rand.New(rand.NewPCG(r.p.Seed, uint64(i)))
	payload := make([]byte, r.p.Size)
	for j := range payload {
		payload[j] = byte(rng.Uint32())
	}
	at := start.Add(time.Duration(rng.Int64N(int64(r.p.Interval))))
	for at.Before(r.end) {
		if !sleepUntil(ctx, at) {
			return
		}
		sched := at
		if r.inWindow(sched) {
			r.sent.Add(1)
			r.inflight.Add(1)
			d.Send(payload, func(err error) {
				defer r.inflight.Done()
				if err != nil {
					r.sendErrs.Add(1)
					r.fail(fmt.Errorf("device %d: produce: %w", i, err))
					return
				}
				r.res.Produce.add(time.Since(sched))
				r.acked.Add(1)
			})
		} else {
			d.Send(payload, func(error) {})
		}
		gap := float64(r.p.Interval) * (1 + r.p.Jitter*(2*rng.Float64()-1))
		at = at.Add(time.Duration(gap))
	}
}

// command writes CmdRate commands a second, each to a random connected
// device, until the window ends.
func (r *run) command(ctx context.Context, c Controller, devs []Device, start time.Time) {
	var live []int
	for i, d := range devs {
		if d != nil {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(r.p.Seed, ^uint64(0)))
	gap := time.Duration(float64(time.Second) / r.p.CmdRate)
	for at := start; at.Before(r.end); at = at.Add(gap) {
		if !sleepUntil(ctx, at) {
			return
		}
		i := live[rng.IntN(len(live))]
		now := time.Now()
		counted := r.inWindow(now)
		if counted {
			r.cmdSent.Add(1)
		}
		if err := c.Command(ctx, i, EncodeCommand(i, now)); err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return
			}
			if counted {
				r.cmdSent.Add(-1)
			}
			r.fail(fmt.Errorf("command to device %d: %w", i, err))
		}
	}
}

func call(f func()) {
	if f != nil {
		f()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func sleepUntil(ctx context.Context, at time.Time) bool {
	if d := time.Until(at); d > 0 {
		return sleep(ctx, d)
	}
	return ctx.Err() == nil
}
