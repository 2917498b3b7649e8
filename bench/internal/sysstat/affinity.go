package sysstat

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Layout says which CPUs the servers and the load generator run on.
type Layout struct {
	Server []int // CPUs of the server processes; their GOMAXPROCS is len(Server)
	Load   []int // CPUs of the load generator
	Pinned bool  // false: everything shares every CPU
	Note   string
}

// String describes the layout in one line.
func (l Layout) String() string {
	if !l.Pinned {
		return "not pinned: " + l.Note
	}
	return fmt.Sprintf("server on CPU %s, load generator on CPU %s (sched_setaffinity)", cpuList(l.Server), cpuList(l.Load))
}

// ServerProcs is the GOMAXPROCS both servers get.
func (l Layout) ServerProcs() int { return len(l.Server) }

// PlanLayout splits the CPUs this process may use: the last one for the
// load generator, the others for the server. With fewer than two CPUs, or
// where sched_setaffinity is refused, or when disabled, nothing is pinned
// and the servers get every CPU.
func PlanLayout(enabled bool) Layout {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		n := runtime.NumCPU()
		return Layout{Server: seq(n), Load: seq(n), Note: "sched_getaffinity: " + err.Error()}
	}
	cpus := cpusOf(&set)
	switch {
	case !enabled:
		return Layout{Server: cpus, Load: cpus, Note: "disabled by --pin=false"}
	case len(cpus) < 2:
		return Layout{Server: cpus, Load: cpus, Note: fmt.Sprintf("only %d CPU available", len(cpus))}
	}
	// Probe: setting this thread's mask to what it already is must work.
	runtime.LockOSThread()
	err := unix.SchedSetaffinity(0, &set)
	runtime.UnlockOSThread()
	if err != nil {
		return Layout{Server: cpus, Load: cpus, Note: "sched_setaffinity refused: " + err.Error()}
	}
	return Layout{Server: cpus[:len(cpus)-1], Load: cpus[len(cpus)-1:], Pinned: true}
}

// All returns the union of the layout's CPUs.
func (l Layout) All() []int {
	seen := map[int]bool{}
	var out []int
	for _, c := range append(append([]int(nil), l.Server...), l.Load...) {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// PinSelf moves every thread of this process to cpus (threads created
// later inherit the mask of the thread that creates them) and sets
// GOMAXPROCS to len(cpus).
func PinSelf(cpus []int) error {
	set := setOf(cpus)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread may exit between the listing and the call.
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("sysstat: pin thread %d: %w", tid, err)
		}
	}
	runtime.GOMAXPROCS(len(cpus))
	return nil
}

// StartPinned starts cmd with its CPU mask set to cpus: the child
// inherits the mask of the thread that forks it, so the calling thread
// takes the mask for the duration of the fork. An empty cpus starts it
// unpinned.
func StartPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	set := setOf(cpus)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return err
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

func setOf(cpus []int) unix.CPUSet {
	var set unix.CPUSet
	set.Zero()
	for _, c := range cpus {
		set.Set(c)
	}
	return set
}

func cpusOf(set *unix.CPUSet) []int {
	var out []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
