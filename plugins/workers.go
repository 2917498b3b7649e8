package plugins

import (
	"context"
	"runtime"

	"github.com/tetratelabs/wazero/api"
)

// Guest code runs on at most MaxConcurrentCalls workers at once. A
// metered guest can be preempted by the Go scheduler at every yield, but
// it is only after 10 ms on its processor (P) that the scheduler asks it
// to, and it never gives its core back to the kernel: without a bound,
// enough busy plugins would hold every core, and polls and produces
// without plugins would queue behind them. With the bound, the workers
// still hold as many Ps, which the node's goroutines then wait for: a
// program running a host raises GOMAXPROCS by the workers (Processors).
//
// A plugin whose call ran slowYields metering slices or more, or timed
// out (a loop, a memory bomb, or only a heavy filter), runs from then on
// (and a new plugin, until quickCalls calls have shown it quick) at a
// lower priority where the kernel allows it (Linux: priorities are
// per thread): its guest entries (instantiation, init, filter, propose) are handed to the
// worker's own goroutine, locked to an OS thread with nice workerNice, and
// the caller waits. When the node's own threads and such a plugin want
// the same core, the node's win, and the plugin still has every idle
// cycle. The rest of a call (copying the view in, validating the answer)
// stays on the caller's goroutine. Other plugins' calls, and every call
// elsewhere, run on the caller's goroutine with the worker as a token:
// the hand-off to another thread costs about 20 µs of CPU per call, a
// fifth of a fast filter's poll (RATIONALE.md).

// Processors returns cfg with MaxConcurrentCalls resolved against
// procs, the processors the program's Go code would have without plugins
// (GOMAXPROCS), and the GOMAXPROCS a program running a host with it
// should set: procs plus one per worker. Guest code holds a Go processor
// (P) for as long as it runs, and a runnable goroutine waits for a free
// P, however idle the cores are; so the workers get Ps of their own and
// the node's goroutines keep procs of them. The cores are shared by the
// kernel, where slow plugins run at a lower priority. Measured beside a
// looping and a memory-growing plugin on 2 cores, the goroutines' p99
// wait for a P was 0.12 to 7.3 ms with 2 Ps, and 0.05 to 0.23 ms (as
// without the plugins) with 3. ledge serve does not raise it: on a quiet
// machine the honest p99 beside hostile plugins was worse with the extra
// P, and every node lost a quarter of its produce throughput
// (RATIONALE.md, Processors for the workers).
func Processors(cfg Config, procs int) (Config, int) {
	procs = max(procs, 1)
	if cfg.MaxConcurrentCalls <= 0 {
		cfg.MaxConcurrentCalls = max(1, procs-1)
	}
	return cfg, procs + cfg.MaxConcurrentCalls
}

// workerNice is the nice value of the workers' threads: a thread at 10
// weighs about a tenth of one at 0 in the kernel's fair scheduler.
const workerNice = 10

// slowYields is how many metering slices (meter.go: 20 000 units, 25 to
// 60 µs of loop code each) a call may run before its plugin's calls move
// to the workers' threads, for good: about 1 to 2.5 ms of guest code.
// Counting slices, not time, keeps a loaded machine's preemptions from
// moving a fast plugin.
const slowYields = 40

// quickCalls is how many quick calls in a row move a new plugin to the
// callers' goroutines: until then its calls run on the workers' threads,
// so that a plugin looping from its very first call never holds a
// thread of the node's priority.
const quickCalls = 100

// onThreads reports whether p's guest code runs on the workers' threads.
func (p *plugin) onThreads() bool {
	return dedicatedThreads && (p.slow.Load() || p.quick.Load() < quickCalls)
}

// judge records whether a call of p was slow.
func (p *plugin) judge(slow bool) {
	switch {
	case p.slow.Load():
	case slow:
		p.slow.Store(true)
	case p.quick.Load() < quickCalls:
		p.quick.Add(1)
	}
}

// closeOffPath closes an instance taken out of the pool; a plugin on the
// workers' threads has it closed on one too if one is idle, since giving
// back the memory of a large instance is work for the kernel (unmapping
// every page the guest touched) that would otherwise fall on the caller's
// thread. It never waits for a worker.
func (h *Host) closeOffPath(in *instance) {
	var w *worker
	if in.p.onThreads() {
		w = h.pool.tryTake(in.p)
	}
	if w == nil {
		in.close()
		return
	}
	w.onThread()
	_ = w.run(true, workerJob{run: func() error { in.close(); return nil }})
	h.pool.put(w, in.p, 0)
}

// worker runs guest code; it belongs to one entry between the pool's
// take and put (workerpool.go).
type worker struct {
	jobs chan workerJob // nil: the caller runs the guest itself
	done chan error
}

// workerJob is one guest entry: a call of fn with stack, or run.
type workerJob struct {
	ctx   context.Context
	fn    api.Function
	stack []uint64
	run   func() error
}

func (j *workerJob) do() error {
	if j.run != nil {
		return j.run()
	}
	return j.fn.CallWithStack(j.ctx, j.stack)
}

// onThread makes sure w has its thread, which is then used for the
// guest entries of the call holding w.
func (w *worker) onThread() {
	if w.jobs == nil {
		w.jobs, w.done = make(chan workerJob), make(chan error)
		go w.serve()
	}
}

// serve runs jobs on a thread of its own, at a lower priority. The thread
// ends with the goroutine (it stays locked), so no other goroutine ever
// runs at that priority.
func (w *worker) serve() {
	runtime.LockOSThread()
	lowerThreadPriority()
	for j := range w.jobs {
		w.done <- j.do()
	}
}

// run runs j on w's thread if thread is set, else on the caller's.
func (w *worker) run(thread bool, j workerJob) error {
	if !thread {
		return j.do()
	}
	w.jobs <- j
	return <-w.done
}
