package plugins

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// workerPool hands the host's MaxConcurrentCalls workers to guest
// entries, fairly between plugins. A worker set free goes to the waiting
// entry whose plugin has used the workers least (start-time fair
// queueing, in metering slices): however many calls of one plugin queue,
// another plugin's call waits only for the entries already running, and
// a plugin whose calls run to their deadline (a loop) gets the workers
// in proportion to what others leave, not to how many calls it queued.
// Within a plugin, entries run in their order of arrival.
//
// Usage is counted in metering slices (meter.go), plus one per entry:
// counts, not time, so that a loaded machine's preemptions do not shift
// the shares.
type workerPool struct {
	mu      sync.Mutex
	size    int
	idle    []*worker
	waiting []*workerWait // in order of arrival
	// vtime is the usage of the plugin last handed a worker: a plugin
	// that was idle starts again from it, so that it neither loses the
	// turns it did not take nor saves them up.
	vtime   int64
	stopped bool
	allIdle chan struct{} // closed once stopped with every worker idle
}

// workerShare is a plugin's part in the pool, under workerPool.mu.
type workerShare struct {
	usage   int64 // metering slices of its entries, plus one per entry
	queued  int   // entries waiting for a worker
	running int   // entries holding one
}

// workerWait is an entry waiting for a worker.
type workerWait struct {
	p     *plugin
	ready chan *worker // buffered: a worker is handed over without waiting
}

// newWorkerPool returns n idle workers; their threads start on first use.
func newWorkerPool(n int) *workerPool {
	wp := &workerPool{size: n, allIdle: make(chan struct{})}
	for range n {
		wp.idle = append(wp.idle, &worker{})
	}
	return wp
}

// take waits for a worker for an entry of p, until ctx ends (ErrBusy)
// or closing is closed (ErrClosed).
func (wp *workerPool) take(ctx context.Context, p *plugin, closing <-chan struct{}) (*worker, error) {
	wp.mu.Lock()
	if wp.stopped {
		wp.mu.Unlock()
		return nil, ErrClosed
	}
	if len(wp.waiting) == 0 && len(wp.idle) > 0 {
		w := wp.popIdleLocked()
		wp.startLocked(p)
		wp.mu.Unlock()
		return w, nil
	}
	s := &p.share
	if s.queued == 0 && s.running == 0 {
		s.usage = max(s.usage, wp.vtime)
	}
	s.queued++
	wt := &workerWait{p: p, ready: make(chan *worker, 1)}
	wp.waiting = append(wp.waiting, wt)
	wp.mu.Unlock()

	var err error
	select {
	case w := <-wt.ready:
		return w, nil
	case <-closing:
		err = ErrClosed
	case <-ctx.Done():
		err = fmt.Errorf("%w: %q: waiting for one of the %d plugin workers: %w", ErrBusy, p.name, wp.size, context.Cause(ctx))
	}
	wp.mu.Lock()
	if i := slices.Index(wp.waiting, wt); i >= 0 {
		wp.waiting = slices.Delete(wp.waiting, i, i+1)
		s.queued--
		wp.mu.Unlock()
		return nil, err
	}
	wp.mu.Unlock()
	wp.put(<-wt.ready, p, 0) // handed one meanwhile: unused
	return nil, err
}

// tryTake returns an idle worker for p if one is idle and nothing waits,
// else nil.
func (wp *workerPool) tryTake(p *plugin) *worker {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	if wp.stopped || len(wp.waiting) > 0 || len(wp.idle) == 0 {
		return nil
	}
	wp.startLocked(p)
	return wp.popIdleLocked()
}

// turn is one call's hold on a worker: the call's first guest entry
// takes one, its later entries (starting an instance, its init, the call
// itself) keep it, and the call ends the turn when its guest code is
// done, so that it does not lose its plugin's turn between entries.
type turn struct {
	w *worker
}

// end gives back the worker of t, if it took one.
func (wp *workerPool) end(t *turn, p *plugin) {
	if t.w != nil {
		wp.put(t.w, p, 0)
		t.w = nil
	}
}

// charge counts used metering slices against p.
func (wp *workerPool) charge(p *plugin, used int64) {
	wp.mu.Lock()
	p.share.usage += used
	wp.mu.Unlock()
}

// put gives back the worker an entry of p took, charging p used slices,
// and hands it to the next entry due.
func (wp *workerPool) put(w *worker, p *plugin, used int64) {
	wp.mu.Lock()
	p.share.running--
	p.share.usage += used
	if !wp.stopped && len(wp.waiting) > 0 {
		next := 0
		for i, wt := range wp.waiting {
			if wt.p.share.usage < wp.waiting[next].p.share.usage {
				next = i
			}
		}
		wt := wp.waiting[next]
		wp.waiting = slices.Delete(wp.waiting, next, next+1)
		wt.p.share.queued--
		wp.startLocked(wt.p)
		wp.mu.Unlock()
		wt.ready <- w
		return
	}
	wp.idle = append(wp.idle, w)
	if wp.stopped && len(wp.idle) == wp.size {
		close(wp.allIdle)
	}
	wp.mu.Unlock()
}

func (wp *workerPool) startLocked(p *plugin) {
	p.share.running++
	wp.vtime = max(wp.vtime, p.share.usage)
}

func (wp *workerPool) popIdleLocked() *worker {
	w := wp.idle[len(wp.idle)-1]
	wp.idle = wp.idle[:len(wp.idle)-1]
	return w
}

// waitingFor reports how many entries of p wait for a worker.
func (wp *workerPool) waitingFor(p *plugin) int {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	return p.share.queued
}

// stop waits for every worker to be given back and ends their threads;
// the host is closed and no guest code runs. Entries still waiting leave
// with ErrClosed through their closing channel.
func (wp *workerPool) stop() {
	wp.mu.Lock()
	wp.stopped = true
	if len(wp.idle) == wp.size {
		close(wp.allIdle)
	}
	wp.mu.Unlock()
	<-wp.allIdle
	for _, w := range wp.idle {
		if w.jobs != nil {
			close(w.jobs)
		}
	}
}
