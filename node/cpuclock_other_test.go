//go:build !unix

package node

import "time"

// cpuClock falls back to the wall clock where the process's CPU time
// cannot be read; the benchmarks' "cpu-ns/op" is then wall time.
func cpuClock() time.Duration { return time.Duration(time.Now().UnixNano()) }
