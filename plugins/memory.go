package plugins

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/tetratelabs/wazero/experimental"
)

// Guest memory: every instance's linear memory comes from the host's own
// allocator (wazero's experimental.MemoryAllocator), so that the budget
// bounds the memory plugins really hold, growth during a call included,
// and so that a closed instance gives its memory back to the operating
// system at once.
//
// On unix the memory is a private anonymous mapping of the instance's
// largest size, of which the guest touches only what it grew to: the
// pages it never touched cost nothing, growth never copies, and closing
// the instance unmaps it all. Elsewhere it is a Go slice grown by
// copying, which the garbage collector returns.
//
// Accounting (under Host.mu): h.used is the sum of every live memory's
// accounted bytes: what the guest grew to, or, while an instance starts,
// the admission's reservation if that is larger. A memory.grow past
// MaxInstanceMemory, or past what the budget has left once idle
// instances are closed, fails inside the guest (memory.grow returns -1);
// the refusal is remembered so that the call's error says why.

// guestMemory is the linear memory of one instance: its allocator and
// its accounting.
type guestMemory struct {
	h *Host
	p *plugin

	region []byte // the mapping (its length is the reservation) or the heap buffer
	mapped bool
	limit  uint64 // the largest size allowed: MaxInstanceMemory, or less if the module says so

	// Under Host.mu.
	size      uint64 // bytes the guest sees
	accounted int64  // bytes charged to the budget (size, or a larger reservation while starting)
	charged   bool   // accounted is part of h.used and p.memBytes
	starting  bool   // instantiation: the first allocation is never refused
	refusal   error  // the last refused memory.grow of the current call
}

// newGuestMemoryLocked charges reserve bytes for an instance of p about
// to start.
func (h *Host) newGuestMemoryLocked(p *plugin, reserve int64) *guestMemory {
	g := &guestMemory{h: h, p: p, accounted: reserve, charged: true, starting: true}
	h.chargeLocked(p, reserve)
	return g
}

func (h *Host) chargeLocked(p *plugin, n int64) {
	h.used += n
	p.memBytes += n
	h.peak = max(h.peak, h.used)
}

// Allocate implements experimental.MemoryAllocator: wazero calls it once,
// when the instance is created.
func (g *guestMemory) Allocate(_, maxBytes uint64) experimental.LinearMemory {
	g.limit = min(maxBytes, uint64(g.h.cfg.MaxInstanceMemory))
	if region, ok := mapRegion(g.limit); ok {
		g.region, g.mapped = region, true
	}
	return g
}

// Reallocate implements experimental.LinearMemory: it grows the memory
// to size bytes, or returns nil when the growth is refused (memory.grow
// then fails in the guest).
func (g *guestMemory) Reallocate(size uint64) []byte {
	if size > g.limit {
		g.refuse(fmt.Errorf("%w: %q grew its memory past %d MiB, the limit of one instance",
			ErrMemoryLimit, g.p.name, g.limit>>20))
		return nil
	}
	if !g.h.growMemory(g, size) {
		return nil
	}
	if g.mapped {
		return g.region[:size:size]
	}
	if size > uint64(len(g.region)) {
		g.region = append(g.region, make([]byte, size-uint64(len(g.region)))...)
	}
	return g.region[:size]
}

func (g *guestMemory) refuse(err error) {
	g.h.mu.Lock()
	g.refusal = err
	g.h.mu.Unlock()
}

// Free implements experimental.LinearMemory: wazero calls it when the
// instance is closed. The accounting was usually settled when the pool
// let the instance go.
func (g *guestMemory) Free() {
	g.h.mu.Lock()
	g.h.unchargeLocked(g)
	region, mapped := g.region, g.mapped
	g.region, g.mapped = nil, false
	g.h.mu.Unlock()
	if mapped {
		unmapRegion(region)
	}
}

// unchargeLocked takes g out of the budget; the memory itself goes when
// the instance is closed.
func (h *Host) unchargeLocked(g *guestMemory) {
	if !g.charged {
		return
	}
	g.charged = false
	h.used -= g.accounted
	g.p.memBytes -= g.accounted
	g.accounted = 0
	h.signalLocked()
}

// started ends g's instantiation: the part of the reservation the guest
// did not use goes back to the budget.
func (h *Host) started(g *guestMemory) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g.starting = false
	if g.charged && g.accounted > int64(g.size) {
		h.used -= g.accounted - int64(g.size)
		g.p.memBytes -= g.accounted - int64(g.size)
		g.accounted = int64(g.size)
		h.signalLocked()
	}
}

// growMemory charges the growth of g to size bytes, closing idle
// instances (least recently used first) when the budget needs room.
// It refuses when the budget stays short: the other instances are busy.
func (h *Host) growMemory(g *guestMemory, size uint64) bool {
	for {
		h.mu.Lock()
		need := int64(size) - g.accounted
		if need <= 0 || g.starting && g.size == 0 || h.used+need <= h.cfg.MemoryBudget {
			if need > 0 && g.charged {
				g.accounted += need
				h.chargeLocked(g.p, need)
			}
			g.size = size
			h.mu.Unlock()
			return true
		}
		victim := h.lruIdleLocked()
		if victim == nil {
			g.refusal = fmt.Errorf("%w: %q could not grow its memory to %d MiB: %d of the %d MiB plugin budget are held by instances in use",
				ErrMemoryBudget, g.p.name, size>>20, h.used>>20, h.cfg.MemoryBudget>>20)
			h.mu.Unlock()
			return false
		}
		h.evictLocked(victim.p, victim)
		h.mu.Unlock()
		victim.close()
	}
}

// takeRefusal returns and clears the refusal of the current call.
func (g *guestMemory) takeRefusal() error {
	g.h.mu.Lock()
	defer g.h.mu.Unlock()
	err := g.refusal
	g.refusal = nil
	return err
}

// sizeLocked is the memory the guest grew to.
func (g *guestMemory) sizeLocked() int64 { return int64(g.size) }

// giveBackDelay is how long after the first instance or module closed
// the host returns freed Go memory to the operating system: closings
// within it share one return.
const giveBackDelay = 5 * time.Second

// scheduleGiveBack returns the Go memory closed instances and modules
// used (their wazero structures, a compiled module's loading) to the
// operating system soon. Their linear memory is already back (unmapped
// on close), but without this the garbage collector would only find the
// rest at its next cycle, which an idle node may not run for minutes,
// and the runtime would keep the pages a while longer. It runs when idle
// instances time out and when a plugin's module goes, never on a call's
// path: one forced collection per giveBackDelay at most.
func (h *Host) scheduleGiveBack() {
	if h.giveBack.Swap(true) {
		return
	}
	time.AfterFunc(giveBackDelay, func() {
		h.giveBack.Store(false)
		debug.FreeOSMemory()
	})
}
