package sim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ledgemq/ledge/node/owner"
)

// Config configures a run.
type Config struct {
	// Steps is the number of ops of the schedule (default 150).
	Steps int
	// Settle returns once every goroutine of the engine is idle (blocked
	// waiting for work). Under testing/synctest it is synctest.Wait; it
	// must be set.
	Settle func()
	// Generators are the ops the schedule draws from (default
	// DefaultGenerators). Simulations of groups and state stores append
	// theirs.
	Generators []Generator
	// Checks run after every step (restarts included), after the
	// built-in ones; they report with World.Violate.
	Checks []func(w *World)
	// Logf, if set, receives the trace as it is made.
	Logf func(format string, args ...any)
	// States adds the state of every live partition to the trace after
	// each step.
	States bool
	// StateStore makes the group's members keep per-key counts in the
	// partitions' state stores, committed with their offsets
	// (GroupGenerators).
	StateStore bool
	// FullDisk widens or breaks the full disk on purpose (space.go), to
	// show that its checks fail when the engine, or the disk, breaks
	// their rule.
	FullDisk FullDiskMode
}

// Result is what a run did.
type Result struct {
	Seed  uint64
	Trace []string
	// Err is the first broken invariant (a *Violation) or the reason the
	// run could not go on.
	Err error
}

// Run runs the schedule of seed: it creates the topics, draws and runs
// Config.Steps ops, letting the engine go idle after each, checking the
// model after each and after every restart, and ends with a power loss
// and a last recovery check. It must run inside a testing/synctest
// bubble (or wherever Settle and time are deterministic).
func Run(seed uint64, cfg Config) Result {
	if cfg.Steps == 0 {
		cfg.Steps = 150
	}
	if cfg.Generators == nil {
		cfg.Generators = DefaultGenerators()
	}
	if cfg.Settle == nil {
		return Result{Seed: seed, Err: errors.New("sim: Config.Settle is required")}
	}
	w := newWorld(seed, cfg)
	err := w.run()
	w.shutdown()
	cfg.Settle()
	return Result{Seed: seed, Trace: w.trace, Err: err}
}

func (w *World) run() error {
	if err := w.open(); err != nil {
		return err
	}
	for _, name := range w.names {
		if err := w.do(createOp{name}); err != nil {
			return err
		}
	}
	for w.step = 1; w.step <= w.cfg.Steps; w.step++ {
		op := w.draw()
		if op == nil {
			continue
		}
		if err := w.do(op); err != nil {
			return err
		}
	}
	return w.do(restartOp{kind: RestartPowerLoss, pct: w.Rng.IntN(101), garbage: 30})
}

// draw picks the next op by the generators' weights.
func (w *World) draw() Op {
	weights := make([]int, len(w.cfg.Generators))
	total := 0
	for i, g := range w.cfg.Generators {
		weights[i] = max(0, g.Weight(w))
		total += weights[i]
	}
	if total == 0 {
		return nil
	}
	n := w.Rng.IntN(total)
	for i, g := range w.cfg.Generators {
		if n < weights[i] {
			return g.Next(w)
		}
		n -= weights[i]
	}
	return nil
}

// do runs one op, lets the engine settle, and checks the live partitions.
func (w *World) do(op Op) error {
	_, err := w.Do(op)
	return err
}

// Do runs one op, lets the engine settle, checks the live partitions, and
// returns the op's outcome. The error is a *Violation if an invariant
// broke.
func (w *World) Do(op Op) (string, error) {
	out, err := op.Run(w)
	w.cfg.Settle()
	for _, f := range append(w.Disk.Fired(), w.Disk.NoSpaceHits()...) {
		if out != "" {
			out += " "
		}
		out += "[" + f + "]"
	}
	line := fmt.Sprintf("%4d %s", w.step, op)
	if out != "" {
		line += ": " + out
	}
	w.Tracef("%s", line)
	if w.cfg.States {
		for _, p := range w.Live() {
			w.Tracef("       %s: %s", p, describeState(p))
		}
	}
	if err != nil {
		return out, fmt.Errorf("step %d (%s): %w", w.step, op, err)
	}
	if len(w.violations) == 0 {
		for _, p := range w.Live() {
			w.checkState(p, nil)
			w.checkNotFailedForSpace(p)
		}
		for _, check := range w.cfg.Checks {
			check(w)
		}
	}
	if len(w.violations) > 0 {
		v := &Violation{Step: w.step, What: w.violations}
		w.violations = nil
		return out, v
	}
	return out, nil
}

// faultFired reports whether a fault fired during the current op.
func (w *World) faultFired() bool {
	w.Disk.inj.mu.Lock()
	defer w.Disk.inj.mu.Unlock()
	return len(w.Disk.inj.fired) > 0
}

// Report formats a failed run for a test log: the violation, the last
// lines of the trace and how to replay it.
func (r Result) Report(tail int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %v\n", r.Seed, r.Err)
	from := max(0, len(r.Trace)-tail)
	if from > 0 {
		fmt.Fprintf(&b, "  ... %d steps before\n", from)
	}
	for _, l := range r.Trace[from:] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "replay: go test ./internal/sim -run Sim -seed %d -v", r.Seed)
	return b.String()
}

func constant(n int) func(*World) int { return func(*World) int { return n } }

// pick returns a random element of xs.
func pick[T any](w *World, xs []T) T { return xs[w.Rng.IntN(len(xs))] }

// DefaultGenerators are the ops of the storage simulation: appends, polls
// and commits through the owners; purges (some racing an append),
// retention and time passing; topic deletion, re-creation and work sent to
// deleted topics; session and producer counters; injected failures of
// file, directory and WAL fsyncs; and restarts (clean, process crash,
// power loss).
func DefaultGenerators() []Generator {
	live := func(n int) func(*World) int {
		return func(w *World) int {
			if len(w.Live()) == 0 {
				return 0
			}
			return n
		}
	}
	return []Generator{
		{Name: "produce", Weight: live(30), Next: func(w *World) Op {
			return produceOp{p: pick(w, w.Live()), n: 1 + w.Rng.IntN(6)}
		}},
		{Name: "poll", Weight: live(24), Next: func(w *World) Op {
			p := pick(w, w.Live())
			op := pollOp{p: p, maxBytes: []int{1, 300, 2048, 1 << 20}[w.Rng.IntN(4)]}
			if w.Rng.IntN(4) > 0 {
				op.consumer, op.from = pick(w, consumerNames), owner.FromNext
				return op
			}
			op.from = []owner.Position{owner.FromOffset, owner.FromFirst, owner.FromLast, owner.FromEnd}[w.Rng.IntN(4)]
			st := p.Engine.State()
			op.offset = st.LogStart + w.Rng.Uint64N(st.HighWatermark-st.LogStart+1)
			if w.Rng.IntN(5) == 0 && st.LogStart > 0 {
				op.offset = w.Rng.Uint64N(st.LogStart) // below the start: refused
			}
			return op
		}},
		{Name: "commit", Weight: live(8), Next: func(w *World) Op {
			return commitOp{p: pick(w, w.Live()), within: w.Rng.IntN(3) == 0}
		}},
		{Name: "purge", Weight: live(5), Next: func(w *World) Op {
			return purgeOp{p: pick(w, w.Live()), race: w.Rng.IntN(3) == 0}
		}},
		{Name: "retention", Weight: live(3), Next: func(w *World) Op {
			return retentionOp{p: pick(w, w.Live())}
		}},
		{Name: "tick", Weight: constant(6), Next: func(w *World) Op {
			return tickOp{d: time.Duration(1+w.Rng.IntN(400)) * time.Millisecond}
		}},
		{Name: "fault", Weight: func(w *World) int {
			if w.Disk.Armed() {
				return 0
			}
			return 6
		}, Next: func(w *World) Op {
			f := Fault{Kind: FaultKind(1 + w.Rng.IntN(len(faultNames)))}
			f.Drop = (f.Kind == FaultSegmentSync || f.Kind == FaultIndexSync || f.Kind == FaultWALSync) && w.Rng.IntN(2) == 0
			return faultOp{f}
		}},
		{Name: "restart", Weight: func(w *World) int {
			if w.Broken() {
				return 40
			}
			return 3
		}, Next: func(w *World) Op {
			return restartOp{kind: RestartKind(1 + w.Rng.IntN(3)), pct: w.Rng.IntN(101), garbage: 30}
		}},
		{Name: "delete", Weight: live(1), Next: func(w *World) Op {
			return deleteOp{name: pick(w, w.Live()).Topic.Name}
		}},
		{Name: "create", Weight: func(w *World) int {
			for _, n := range w.names {
				if w.topics[n] == nil {
					return 4
				}
			}
			return 0
		}, Next: func(w *World) Op {
			for _, n := range w.names {
				if w.topics[n] == nil {
					return createOp{n}
				}
			}
			return nil
		}},
		countersGenerator(),
		spaceGenerators()[0],
		spaceGenerators()[1],
		{Name: "zombie", Weight: func(w *World) int {
			if len(w.zombies) == 0 {
				return 0
			}
			return 2
		}, Next: func(w *World) Op {
			z := pick(w, w.zombies)
			if t := w.topics[z.Topic.Name]; t != nil && z.Index < len(t.Parts) && w.Rng.IntN(2) == 0 {
				return recreatedCommitOp{zombie: z, live: t.Parts[z.Index]}
			}
			return zombieOp{p: z, what: w.Rng.IntN(3)}
		}},
	}
}
