package config

import (
	"fmt"
	"os"
)

// The garbage collector's settings. Go's default (GOGC=100: collect when
// the heap has doubled) suits a process whose live heap is small; a node
// holding thousands of connections is not one. At 5,000 devices a node
// holds about 270 MB of live heap and 25,000 goroutines on one
// processor, and with GOGC=100 each collection's marking took 0.5–1.2 s,
// during which the node's UDP socket overflowed and produce p99 rose to
// 7 s; with GOGC=400, 9.5 ms (bench/README.md, "The fleet, recorded").
// So the node collects at five times its live heap by default, and bounds
// what that costs with a soft memory limit: near the limit the collector
// works as hard as it must, whatever the percent says.
const (
	defaultGCPercent = 400
	// A node's soft memory limit, unless one is set, is three quarters of
	// its memory (nodeMemory): the rest is the plugins' (their linear
	// memory is mapped outside Go's heap), the page cache's and the
	// kernel's.
	defaultLimitNum, defaultLimitDen = 3, 4
)

// GC is what the node sets Go's garbage collector to at start.
type GC struct {
	// Percent is the collector's target percent (debug.SetGCPercent); -1
	// leaves Go's own, GOGC from the environment.
	Percent int
	// Limit is the soft memory limit in bytes (debug.SetMemoryLimit); 0
	// leaves Go's own, GOMEMLIMIT from the environment, or none.
	Limit int64
	// PercentFrom and LimitFrom say where each came from, for the log.
	PercentFrom, LimitFrom string
}

// GC returns the garbage collector's settings: gc_percent when set (in
// the file, the environment or a flag), else GOGC when it is in the
// environment, else 400; memory_limit when set, else GOMEMLIMIT when it
// is in the environment, else three quarters of the node's memory (none
// when that cannot be read).
func (c *Config) GC() GC {
	return c.gc(os.LookupEnv)
}

func (c *Config) gc(env func(string) (string, bool)) GC {
	var g GC
	gogc, _ := env("GOGC")
	hasGOGC := gogc != "" // as Go reads it: empty is unset
	switch {
	case c.Source("gc_percent") != SourceDefault || !hasGOGC:
		g.Percent, g.PercentFrom = c.GCPercent, c.origins["gc_percent"]
	default:
		g.Percent, g.PercentFrom = -1, "GOGC="+gogc
	}
	gomemlimit, _ := env("GOMEMLIMIT")
	hasLimit := gomemlimit != ""
	switch {
	case c.MemoryLimit > 0:
		g.Limit, g.LimitFrom = c.MemoryLimit, c.origins["memory_limit"]
	case hasLimit:
		g.LimitFrom = "GOMEMLIMIT=" + gomemlimit
	default:
		if m := c.nodeMemory(); m > memoryUnknown {
			g.Limit = m / defaultLimitDen * defaultLimitNum
			g.LimitFrom = fmt.Sprintf("3/4 of the node's %d MiB", m>>20)
		} else {
			g.LimitFrom = "none: the node's memory is unknown"
		}
	}
	return g
}

// LogAttrs describes the settings for the node's start-up log: each
// value and where it came from.
func (g GC) LogAttrs() []any {
	percent := g.PercentFrom
	if g.Percent >= 0 {
		percent = fmt.Sprintf("%d (%s)", g.Percent, g.PercentFrom)
	}
	limit := g.LimitFrom
	if g.Limit > 0 {
		limit = fmt.Sprintf("%d MiB (%s)", g.Limit>>20, g.LimitFrom)
	}
	return []any{"gc_percent", percent, "memory_limit", limit}
}
