package quic

import (
	"context"
	"sync"
	"sync/atomic"
)

// budget is a byte semaphore shared by all stream readers of a listener.
// Waiters are served first come, first served, so a large frame is not
// starved by a stream of small ones.
type budget struct {
	capacity int64

	mu      sync.Mutex
	used    int64
	waiters []*budgetWaiter

	waits   atomic.Uint64 // acquisitions that had to wait
	waiting atomic.Int64  // readers waiting now
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes were granted
}

func newBudget(capacity int64) *budget { return &budget{capacity: capacity} }

// acquire takes n bytes, waiting while they are not available. It reports
// whether it had to wait. onWait, if set, is called with n once before
// waiting. n must not exceed the capacity.
func (b *budget) acquire(ctx context.Context, n int64, onWait func(int)) (waited bool, err error) {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.capacity {
		b.used += n
		b.mu.Unlock()
		return false, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	b.waits.Add(1)
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	if onWait != nil {
		onWait(int(n))
	}
	select {
	case <-w.ready:
		return true, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	select {
	case <-w.ready:
		// Granted while the context ended: give the bytes back.
		b.mu.Unlock()
		b.release(n)
	default:
		for i, x := range b.waiters {
			if x == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		// The head may have been the one blocking the others.
		b.grantLocked()
		b.mu.Unlock()
	}
	return true, context.Cause(ctx)
}

// tryAcquire takes n bytes if they are available without waiting.
func (b *budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) == 0 && b.used+n <= b.capacity {
		b.used += n
		return true
	}
	return false
}

// release returns n bytes and wakes the waiters they unblock.
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		panic("quic: in-flight budget released more than it granted")
	}
	b.grantLocked()
	b.mu.Unlock()
}

func (b *budget) grantLocked() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.capacity {
			return
		}
		b.used += w.n
		close(w.ready)
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
	}
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
