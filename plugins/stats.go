package plugins

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Stats are the counters of one plugin, as a snapshot.
type Stats struct {
	// Calls counts filter and propose calls that reached the plugin
	// (calls on empty views are answered by the host and not counted).
	Calls uint64
	// Failures counts calls and instance start-ups that failed, for any
	// reason but a busy host: a call that never got a worker or an
	// instance (ErrBusy) never reached the plugin.
	Failures uint64
	// RecordsIn counts the records of the views given to the plugin;
	// RecordsOut the records its filters kept, or the records its
	// transforms output.
	RecordsIn, RecordsOut uint64
	// CallTime is the total time spent in calls; MaxCallTime the longest.
	CallTime, MaxCallTime time.Duration
	// Timeouts, Traps, InvalidAnswers, GuestErrors, MemoryLimits and
	// MemoryBudget count failures by cause (ErrTimeout, ErrTrap,
	// ErrInvalidAnswer, ErrPluginFailed, ErrMemoryLimit, ErrMemoryBudget).
	Timeouts, Traps, InvalidAnswers, GuestErrors uint64
	MemoryLimits, MemoryBudget                   uint64
	// Strikes counts the failures held against the plugin; at
	// Config.MaxStrikes it is Quarantined.
	Strikes     int
	Quarantined bool
	// QuarantineReason says why a quarantined plugin was quarantined: its
	// strikes and its last failure.
	QuarantineReason string
	// Instances counts live instances (busy or idle); IdleInstances the
	// idle ones.
	Instances, IdleInstances int
	// Instantiations counts instances started.
	Instantiations uint64
	// MemoryPages is the linear memory of the live instances in 64 KiB
	// pages, as charged to the budget now; MaxMemoryPages the largest
	// single instance seen (what a new instance is admitted against).
	MemoryPages, MaxMemoryPages uint64
}

type statCounters struct {
	calls, failures                              atomic.Uint64
	recordsIn, recordsOut                        atomic.Uint64
	callNanos, maxCallNanos                      atomic.Int64
	timeouts, traps, invalidAnswers, guestErrors atomic.Uint64
	memoryLimits, memoryBudget                   atomic.Uint64
	instantiations                               atomic.Uint64
}

func (s *statCounters) call(records, kept int, d time.Duration) {
	s.calls.Add(1)
	s.recordsIn.Add(uint64(records))
	s.recordsOut.Add(uint64(kept))
	s.callNanos.Add(int64(d))
	for {
		m := s.maxCallNanos.Load()
		if int64(d) <= m || s.maxCallNanos.CompareAndSwap(m, int64(d)) {
			break
		}
	}
}

func (s *statCounters) failure(err error) {
	s.failures.Add(1)
	switch {
	case errors.Is(err, ErrMemoryLimit):
		s.memoryLimits.Add(1)
	case errors.Is(err, ErrMemoryBudget):
		s.memoryBudget.Add(1)
	case errors.Is(err, ErrTimeout):
		s.timeouts.Add(1)
	case errors.Is(err, ErrTrap):
		s.traps.Add(1)
	case errors.Is(err, ErrInvalidAnswer):
		s.invalidAnswers.Add(1)
	case errors.Is(err, ErrPluginFailed):
		s.guestErrors.Add(1)
	}
}

func (s *statCounters) snapshot() Stats {
	return Stats{
		Calls:          s.calls.Load(),
		Failures:       s.failures.Load(),
		RecordsIn:      s.recordsIn.Load(),
		RecordsOut:     s.recordsOut.Load(),
		CallTime:       time.Duration(s.callNanos.Load()),
		MaxCallTime:    time.Duration(s.maxCallNanos.Load()),
		Timeouts:       s.timeouts.Load(),
		Traps:          s.traps.Load(),
		InvalidAnswers: s.invalidAnswers.Load(),
		GuestErrors:    s.guestErrors.Load(),
		MemoryLimits:   s.memoryLimits.Load(),
		MemoryBudget:   s.memoryBudget.Load(),
		Instantiations: s.instantiations.Load(),
	}
}

// strikes reports whether err counts against the plugin: traps, timeouts,
// invalid answers and growing past the instance memory limit do; the
// caller giving up, a plugin's own error report and node-wide limits (the
// input size, the memory budget) do not.
func strikes(err error) bool {
	return errors.Is(err, ErrTimeout) || errors.Is(err, ErrTrap) || errors.Is(err, ErrInvalidAnswer) ||
		errors.Is(err, ErrMemoryLimit)
}

// MemoryUsage is the plugin host's linear memory, over all plugins.
type MemoryUsage struct {
	// Used is the memory of the live instances (busy or idle) charged to
	// the budget, in bytes; Peak the most it has been since the host
	// started; Budget is Config.MemoryBudget. Used never exceeds Budget.
	Used, Peak, Budget int64
	// Instances counts live instances, Idle the idle ones.
	Instances, Idle int
}

// Memory reports the host's memory usage.
func (h *Host) Memory() MemoryUsage {
	h.mu.Lock()
	defer h.mu.Unlock()
	u := MemoryUsage{Used: h.used, Peak: h.peak, Budget: h.cfg.MemoryBudget}
	for _, p := range h.plugins {
		u.Instances += p.live
		u.Idle += len(p.idle)
	}
	return u
}

// strike counts a strike against p if err deserves one, quarantining p
// at MaxStrikes (its idle instances are closed).
func (h *Host) strike(p *plugin, err error) {
	if !strikes(err) {
		return
	}
	h.mu.Lock()
	if p.quaran {
		h.mu.Unlock()
		return
	}
	p.strikes++
	var idle []*instance
	var notify func()
	if p.strikes >= h.cfg.MaxStrikes {
		p.quaran = true
		p.reason = fmt.Sprintf("failed %d times, the last: %v", p.strikes, err)
		idle = h.takeIdleLocked(p)
		h.cfg.Logger.Warn("plugin quarantined", "plugin", p.name, "strikes", p.strikes, "last", err)
		if fn, mod := h.onQuarantine.Load(), p.mod; fn != nil && mod != nil {
			name, digest, reason := p.name, mod.digest, p.reason
			notify = func() { go (*fn)(name, digest, reason) }
		}
	}
	h.mu.Unlock()
	closeAll(idle)
	if notify != nil {
		notify()
	}
}
