package config

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Connections and parked polls are sized from memory when their keys are
// left at 0 (the default): an edge gateway with 512 MiB and a server with
// 64 GiB should not share one fixed count. The costs are measured
// (docs/OPERATIONS.md, "Sizing": 5,000 and 10,000 idle devices, each a connection
// with a produce stream and a parked poll) and rounded up, for the
// garbage collector's headroom:
//
//   - a connection, 103–112 KB resident (45–50 KB of Go heap in use,
//     most of it quic-go's and TLS's state, and 35 KB of stacks for its
//     5 goroutines): 128 KiB, over a quarter of the memory;
//   - a parked poll, about 3 KB of heap beyond its stream (its request,
//     its contexts and timer) and the deeper stack of the goroutine that
//     waits: 16 KiB, over a sixteenth of it.
//
// So a node has room for twice as many parked polls as connections, a
// device parking one. The counts stay within [minSized*, maxSized*];
// without a memory figure (no /proc) the fixed fallbacks apply.
const (
	connSizingCost  = 128 << 10
	connSizingShare = 4
	pollSizingCost  = 16 << 10
	pollSizingShare = 16

	minSizedConns     = 256
	maxSizedConns     = 65536
	minSizedParked    = 1024
	maxSizedParked    = 1_000_000
	fallbackConns     = 4096
	fallbackParked    = 8192
	memoryUnknown     = 0
	unlimitedCgroupV2 = "max"
)

// sizeFromMemory sets the connection and parked-poll limits left at 0 from
// memory, the bytes the node may use (0: unknown).
func (c *Config) sizeFromMemory(memory int64) {
	if c.QUIC.MaxConns == 0 {
		c.QUIC.MaxConns = sizedCount(memory, connSizingShare, connSizingCost, minSizedConns, maxSizedConns, fallbackConns)
	}
	if c.Polls.MaxParked == 0 {
		c.Polls.MaxParked = sizedCount(memory, pollSizingShare, pollSizingCost, minSizedParked, maxSizedParked, fallbackParked)
	}
}

func sizedCount(memory, share, cost int64, lo, hi, fallback int) int {
	if memory <= memoryUnknown {
		return fallback
	}
	return int(min(max(memory/share/cost, int64(lo)), int64(hi)))
}

// nodeMemory is the memory the node may use: memory_limit when set, else
// the cgroup's limit (a container's), else the machine's; 0 when none of
// them can be read.
func (c *Config) nodeMemory() int64 {
	if c.MemoryLimit > 0 {
		return c.MemoryLimit
	}
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		if n, err := parseBytes(v); err == nil && n > 0 {
			return n
		}
	}
	machine := meminfoTotal("/proc/meminfo")
	if cg := cgroupLimit("/sys/fs/cgroup/memory.max"); cg > 0 && (machine == 0 || cg < machine) {
		return cg
	}
	return machine
}

// cgroupLimit reads a cgroup v2 memory.max: 0 for none or unreadable.
func cgroupLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	if s == unlimitedCgroupV2 {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// meminfoTotal reads MemTotal from /proc/meminfo: 0 when unreadable.
func meminfoTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
