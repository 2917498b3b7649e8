package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// writeCeiling is what writing new data into the page cache costs on the
// file system of the node's data directory: the part of a produce under
// `none` that the raw QUIC stream does not pay. On a virtual machine whose
// memory the host backs only when the guest first touches it, new
// page-cache pages cost far more than reused ones; this measures it.
type writeCeiling struct {
	Bytes           int64   `json:"bytes"`
	MBPerSec        float64 `json:"mb_per_sec"`
	CPUSecondsPerGB float64 `json:"cpu_seconds_per_gb"`
}

// writeCeilingChunk is the size of each write: large, so that the figure
// is the page cache's cost and not the system calls'.
const writeCeilingChunk = 1 << 20

// measureWriteCeiling writes total bytes in 1 MiB writes to a new file in
// dir, without fsync, and removes it. It measures this process's CPU, so
// nothing else of the process may run meanwhile.
func measureWriteCeiling(dir string, total int64) (*writeCeiling, error) {
	f, err := os.CreateTemp(dir, "write-ceiling-*")
	if err != nil {
		return nil, fmt.Errorf("write ceiling: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, writeCeilingChunk)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	total = max(total/writeCeilingChunk, 1) * writeCeilingChunk
	cpu := startCPU()
	start := time.Now()
	for n := int64(0); n < total; n += writeCeilingChunk {
		if _, err := f.Write(buf); err != nil {
			return nil, fmt.Errorf("write ceiling: %w", err)
		}
	}
	elapsed := time.Since(start).Seconds()
	w := &writeCeiling{Bytes: total, MBPerSec: float64(total) / elapsed / 1e6}
	if s := cpu.used(); s > 0 {
		w.CPUSecondsPerGB = s / (float64(total) / 1e9)
	}
	return w, nil
}

// writeCeilingDir is where measureWriteCeiling writes: the data
// directory of an in-process node ("" for a node elsewhere, whose disk
// this process cannot measure).
func (e *benchEnv) writeCeilingDir() string {
	if e.node == nil || e.dir == "" {
		return ""
	}
	return filepath.Clean(e.dir)
}
