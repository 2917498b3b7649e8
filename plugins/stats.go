package plugins

import (
	"errors"
	"sync/atomic"
	"time"
)

// Stats are the counters of one plugin, as a snapshot.
type Stats struct {
	// Calls counts filter and propose calls that reached the plugin
	// (calls on empty views are answered by the host and not counted).
	Calls uint64
	// Failures counts calls and instance start-ups that failed, for any
	// reason.
	Failures uint64
	// RecordsIn counts the records of the views given to the plugin;
	// RecordsOut the records its filters kept.
	RecordsIn, RecordsOut uint64
	// CallTime is the total time spent in calls; MaxCallTime the longest.
	CallTime, MaxCallTime time.Duration
	// Timeouts, Traps, InvalidAnswers and GuestErrors count failures by
	// cause (ErrTimeout, ErrTrap, ErrInvalidAnswer, ErrPluginFailed).
	Timeouts, Traps, InvalidAnswers, GuestErrors uint64
	// Strikes counts the failures held against the plugin; at
	// Config.MaxStrikes it is Quarantined.
	Strikes     int
	Quarantined bool
	// Instances counts live instances (busy or idle); IdleInstances the
	// idle ones.
	Instances, IdleInstances int
	// Instantiations counts instances started.
	Instantiations uint64
	// MemoryPages is the linear memory of the live instances in 64 KiB
	// pages, as of their last release; MaxMemoryPages the largest single
	// instance seen.
	MemoryPages, MaxMemoryPages uint64
}

type statCounters struct {
	calls, failures                              atomic.Uint64
	recordsIn, recordsOut                        atomic.Uint64
	callNanos, maxCallNanos                      atomic.Int64
	timeouts, traps, invalidAnswers, guestErrors atomic.Uint64
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
		Instantiations: s.instantiations.Load(),
	}
}

// strikes reports whether err counts against the plugin: traps, timeouts
// and invalid answers do; the caller giving up, a plugin's own error
// report and host limits do not.
func strikes(err error) bool {
	return errors.Is(err, ErrTimeout) || errors.Is(err, ErrTrap) || errors.Is(err, ErrInvalidAnswer)
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
	if p.strikes >= h.cfg.MaxStrikes {
		p.quaran = true
		idle = h.takeIdleLocked(p)
		h.cfg.Logger.Warn("plugin quarantined", "plugin", p.name, "strikes", p.strikes, "last", err)
	}
	h.mu.Unlock()
	closeAll(idle)
}
