package plugins

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The pool: every plugin keeps idle instances, keyed by the kind and
// parameters they were initialized with; all instances of all plugins
// share the memory budget. An instance is handed to one caller at a time
// and comes back with release.

// acquire returns an instance of p initialized for kind with params (the
// encoded parameters, also the pool key), starting one if needed. With nil
// params it returns an instance not yet initialized.
func (h *Host) acquire(ctx context.Context, t *turn, p *plugin, kind Kind, params []byte) (*instance, error) {
	key := string(params)
	for {
		h.mu.Lock()
		if err := h.usableLocked(p); err != nil {
			h.mu.Unlock()
			return nil, err
		}
		if params == nil {
			if in := h.takeMatchingLocked(p, func(in *instance) bool { return !in.bound }); in != nil {
				h.mu.Unlock()
				return in, nil
			}
		}
		// An idle instance with the same parameters, else an uninitialized
		// one (the probe of Add), else a new one.
		if in := h.takeMatchingLocked(p, func(in *instance) bool { return in.bound && in.kind == kind && in.key == key }); in != nil {
			h.mu.Unlock()
			return in, nil
		}
		if in := h.takeMatchingLocked(p, func(in *instance) bool { return !in.bound }); in != nil {
			h.mu.Unlock()
			return h.bindOrDiscard(ctx, t, in, kind, params)
		}
		var toClose []*instance
		if p.live >= h.cfg.MaxInstances {
			// Make room by closing an idle instance bound to other parameters.
			if len(p.idle) > 0 {
				toClose = append(toClose, h.evictLocked(p, p.idle[0]))
			}
		} else {
			for h.used+p.estBytes > h.cfg.MemoryBudget {
				victim := h.lruIdleLocked()
				if victim == nil {
					break
				}
				toClose = append(toClose, h.evictLocked(victim.p, victim))
			}
			if h.used+p.estBytes <= h.cfg.MemoryBudget {
				in, err := h.newInstanceLocked(ctx, t, p) // unlocks
				closeAll(toClose)
				if err != nil || params == nil {
					return in, err
				}
				return h.bindOrDiscard(ctx, t, in, kind, params)
			}
		}
		if len(toClose) > 0 {
			h.mu.Unlock()
			closeAll(toClose)
			continue
		}
		// Nothing to take, nothing to evict: wait for a release.
		overBudget := p.live < h.cfg.MaxInstances
		wait := h.released
		h.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			if overBudget {
				return nil, fmt.Errorf("%w: %q needs %d KiB, %d of %d KiB in use: %w",
					ErrMemoryBudget, p.name, p.estBytes>>10, h.usedBytes()>>10, h.cfg.MemoryBudget>>10, ctx.Err())
			}
			return nil, fmt.Errorf("%w: %q: all %d instances in use: %w", ErrBusy, p.name, h.cfg.MaxInstances, context.Cause(ctx))
		}
	}
}

func (h *Host) usedBytes() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.used
}

// usableLocked reports why p cannot be called, if it cannot.
func (h *Host) usableLocked(p *plugin) error {
	switch {
	case h.closed:
		return ErrClosed
	case p.removed:
		return fmt.Errorf("%w: %q was removed or replaced", ErrUnknownPlugin, p.name)
	case p.quaran:
		return fmt.Errorf("%w: %q (%s); an operator clears it with a reset or by adding its module again", ErrQuarantined, p.name, p.reason)
	}
	return nil
}

// takeMatchingLocked removes and returns the most recently used idle
// instance of p that match accepts.
func (h *Host) takeMatchingLocked(p *plugin, match func(*instance) bool) *instance {
	for i := len(p.idle) - 1; i >= 0; i-- {
		if in := p.idle[i]; match(in) {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return in
		}
	}
	return nil
}

// lruIdleLocked returns the least recently used idle instance of any
// plugin, or nil.
func (h *Host) lruIdleLocked() *instance {
	var victim *instance
	for _, p := range h.plugins {
		for _, in := range p.idle {
			if victim == nil || in.lastUse < victim.lastUse {
				victim = in
			}
		}
	}
	return victim
}

// evictLocked takes the idle instance in of p out of the pool and its
// accounting; the caller closes it without the lock.
func (h *Host) evictLocked(p *plugin, in *instance) *instance {
	for i, x := range p.idle {
		if x == in {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	h.dropLocked(in)
	return in
}

// dropLocked removes a live instance from the accounting; its memory
// is no longer charged to the budget from here on, and goes back to the
// operating system when the caller closes it (without the lock).
func (h *Host) dropLocked(in *instance) {
	in.p.live--
	h.unchargeLocked(in.gm)
	h.signalLocked()
}

// takeIdleLocked takes every idle instance of p out of the pool.
func (h *Host) takeIdleLocked(p *plugin) []*instance {
	idle := p.idle
	p.idle = nil
	for _, in := range idle {
		h.dropLocked(in)
	}
	return idle
}

// newInstanceLocked reserves memory for and starts a new instance of p.
// It is called with h.mu held and returns with it released.
func (h *Host) newInstanceLocked(ctx context.Context, t *turn, p *plugin) (*instance, error) {
	m := p.mod
	m.refs++
	p.live++
	gm := h.newGuestMemoryLocked(p, p.estBytes)
	h.seq++
	seq := h.seq
	h.mu.Unlock()

	in, err := h.startInstance(ctx, t, p, m, gm, seq)

	if err != nil {
		gm.Free() // if wazero did not
		h.mu.Lock()
		p.live--
		h.unrefModuleLocked(m)
		h.signalLocked()
		h.mu.Unlock()
		if !errors.Is(err, ErrBusy) { // no guest code ran
			h.strike(p, err)
			p.stats.failure(err)
		}
		return nil, err
	}
	p.stats.instantiations.Add(1)
	return in, nil
}

// bindOrDiscard initializes in for kind and params unless it already is.
func (h *Host) bindOrDiscard(ctx context.Context, t *turn, in *instance, kind Kind, params []byte) (*instance, error) {
	if in.bound && in.kind == kind && in.key == string(params) {
		return in, nil
	}
	if err := in.bind(ctx, t, kind, params); err != nil {
		if errors.Is(err, ErrBusy) { // init never ran: the instance is as it was
			h.release(in, false)
			return nil, err
		}
		h.release(in, true)
		h.strike(in.p, err)
		in.p.stats.failure(err)
		return nil, err
	}
	return in, nil
}

// release returns in to its plugin's idle instances, or closes it when
// discard is set (the call trapped, timed out or answered nonsense), when
// the plugin is gone or quarantined, or when the memory budget is
// exceeded.
func (h *Host) release(in *instance, discard bool) {
	h.mu.Lock()
	p := in.p
	p.estBytes = max(p.estBytes, in.gm.sizeLocked())
	if discard || h.closed || p.removed || p.quaran || h.used > h.cfg.MemoryBudget {
		h.dropLocked(in)
		h.mu.Unlock()
		h.closeOffPath(in)
		return
	}
	h.seq++
	in.lastUse = h.seq
	in.idleSince = h.cfg.Now()
	p.idle = append(p.idle, in)
	h.armReaperLocked(h.cfg.IdleTimeout)
	h.signalLocked()
	h.mu.Unlock()
}

// armReaperLocked makes sure idle instances are looked at again in
// after, unless IdleTimeout keeps them forever.
func (h *Host) armReaperLocked(after time.Duration) {
	if h.cfg.IdleTimeout < 0 || h.reaper != nil || h.closed {
		return
	}
	h.reaper = time.AfterFunc(after, h.reapIdle)
}

// reapIdle closes the instances idle for IdleTimeout or longer on the
// host's clock, giving their memory back, and looks again when the next
// one will be.
func (h *Host) reapIdle() {
	h.mu.Lock()
	h.reaper = nil
	now := h.cfg.Now()
	var toClose []*instance
	next := time.Duration(-1)
	for _, p := range h.plugins {
		for i := 0; i < len(p.idle); {
			in := p.idle[i]
			if left := h.cfg.IdleTimeout - now.Sub(in.idleSince); left > 0 {
				if next < 0 || left < next {
					next = left
				}
				i++
				continue
			}
			toClose = append(toClose, h.evictLocked(p, in))
		}
	}
	if next >= 0 {
		h.armReaperLocked(next)
	}
	if len(toClose) > 0 {
		h.scheduleGiveBack()
	}
	h.mu.Unlock()
	closeAll(toClose)
}
