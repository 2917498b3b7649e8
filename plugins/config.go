package plugins

import (
	"log/slog"
	"runtime"
	"time"
)

// Config configures a Host. The zero value is usable: every field has a
// default, applied by NewHost.
type Config struct {
	// CacheDir is the directory of the on-disk compilation cache, so that
	// compiled plugins survive restarts (compiling a Go plugin takes about
	// half a second). Empty: compile in memory only.
	CacheDir string

	// CallTimeout bounds one filter, propose or transform call, from when
	// the call gets one of the workers (MaxConcurrentCalls): its wait for
	// a worker or an instance is bounded by the caller's context alone,
	// and a call whose context ends meanwhile fails with ErrBusy, not
	// held against the plugin. Default DefaultCallTimeout. A call past it
	// is cut off within one metering slice (RATIONALE.md), fails with
	// ErrTimeout and counts a strike. The deadline is on the host's clock
	// (Now), so time the call's thread spends descheduled on a loaded
	// machine counts too: raise it where honest calls miss it.
	CallTimeout time.Duration
	// StartTimeout bounds starting an instance (the guest's own
	// initialization and its init call with parameters). Default 1s.
	StartTimeout time.Duration
	// CompileTimeout bounds compiling a module in Add. Default 30s.
	CompileTimeout time.Duration
	// CompileWorkers is the number of goroutines compiling one module.
	// Default 2; values below 2 are raised to 2, the least with which a
	// compile can be abandoned midway.
	CompileWorkers int

	// MaxModuleBytes bounds the size of a module given to Add. Default
	// 32 MiB.
	MaxModuleBytes int
	// MaxInstanceMemory caps the linear memory of one instance, in bytes,
	// rounded down to 64 KiB pages. Default 64 MiB. A guest growing past
	// it sees memory.grow fail inside the call; if the call then fails (a
	// Go guest panics) it fails with ErrMemoryLimit and counts a strike.
	MaxInstanceMemory int64
	// MemoryBudget bounds the linear memory of all instances of all
	// plugins together, growth during calls included, in bytes. Default
	// 512 MiB. When starting an instance would exceed it, idle instances
	// are closed first; if that is not enough the call waits for one to
	// be released, until its context ends (ErrMemoryBudget). A
	// memory.grow past it, once idle instances are closed, fails inside
	// the guest; if the call then fails it fails with ErrMemoryBudget
	// (no strike: others hold the memory).
	MemoryBudget int64
	// IdleTimeout is how long an instance may stay idle before it is
	// closed and its memory given back. Default 30s; negative: idle
	// instances stay until the budget needs room (or ReleaseIdle).
	IdleTimeout time.Duration
	// MaxInstances bounds the instances of one plugin, busy or idle, which
	// is how many calls of that plugin can be under way at once. Default
	// GOMAXPROCS.
	MaxInstances int
	// MaxConcurrentCalls bounds the guest code running at once, over all
	// plugins (calls, instance start-ups and inits), so that plugins never
	// occupy every CPU: polls and produces without plugins keep a core.
	// Calls past it queue until their context ends, and the plugins
	// take turns: a free worker goes to the plugin that has run the least
	// guest code (in metering slices), a plugin's own calls in order of
	// arrival. A call's deadline starts when it runs. Default
	// max(1, GOMAXPROCS-1).
	MaxConcurrentCalls int
	// MaxInputBytes bounds the input region of one call (View.Size).
	// Default 16 MiB, and at most half of MaxInstanceMemory.
	MaxInputBytes int
	// MaxOutputBytes bounds the answer of one transform call: its output
	// records and its new state, encoded. Default 16 MiB, and at most
	// half of MaxInstanceMemory.
	MaxOutputBytes int
	// MaxStateBytes bounds the state a transform keeps between batches.
	// Default 1 MiB, and at most MaxOutputBytes.
	MaxStateBytes int
	// MaxStrikes is how many traps, timeouts and invalid answers a plugin
	// may cause before it is quarantined. Default 3.
	MaxStrikes int
	// MaxLogBytes bounds what one call may log (host log function and
	// standard output and error together). Default 16 KiB; the rest is
	// dropped with a warning.
	MaxLogBytes int

	// Logger receives plugin output and host events. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of deadlines and call times. Default time.Now.
	Now func() time.Time
	// Seed seeds every instance's random generator (mixed with the module
	// digest and an instance counter). Zero: a random seed.
	Seed [32]byte
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.CallTimeout, DefaultCallTimeout)
	def(&c.StartTimeout, time.Second)
	def(&c.CompileTimeout, 30*time.Second)
	if c.CompileWorkers < 2 {
		c.CompileWorkers = 2
	}
	if c.MaxModuleBytes <= 0 {
		c.MaxModuleBytes = 32 << 20
	}
	if c.MaxInstanceMemory <= 0 {
		c.MaxInstanceMemory = 64 << 20
	}
	c.MaxInstanceMemory = min(c.MaxInstanceMemory, 4<<30) &^ (pageSize - 1)
	if c.MaxInstanceMemory < pageSize {
		c.MaxInstanceMemory = pageSize
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = 512 << 20
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.MaxInstances <= 0 {
		c.MaxInstances = runtime.GOMAXPROCS(0)
	}
	if c.MaxConcurrentCalls <= 0 {
		c.MaxConcurrentCalls = max(1, runtime.GOMAXPROCS(0)-1)
	}
	if c.MaxInputBytes <= 0 {
		c.MaxInputBytes = 16 << 20
	}
	c.MaxInputBytes = int(min(int64(c.MaxInputBytes), c.MaxInstanceMemory/2))
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = 16 << 20
	}
	c.MaxOutputBytes = int(min(int64(c.MaxOutputBytes), c.MaxInstanceMemory/2))
	if c.MaxStateBytes <= 0 {
		c.MaxStateBytes = 1 << 20
	}
	c.MaxStateBytes = min(c.MaxStateBytes, c.MaxOutputBytes)
	if c.MaxStrikes <= 0 {
		c.MaxStrikes = 3
	}
	if c.MaxLogBytes <= 0 {
		c.MaxLogBytes = 16 << 10
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

const pageSize = 65536

// DefaultCallTimeout is the default of Config.CallTimeout.
const DefaultCallTimeout = 100 * time.Millisecond
