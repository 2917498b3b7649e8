package sysstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is USER_HZ, the unit of the CPU times in /proc/PID/stat. It
// is 100 on every Linux architecture Go supports.
const ClockTicks = 100

// Sample is a snapshot of a process's counters.
type Sample struct {
	At         time.Time
	CPU        time.Duration // user + system time of every thread, dead ones included
	WriteBytes int64         // bytes the process caused to be sent to storage (/proc/PID/io write_bytes)
	PeakRSS    int64         // VmHWM in bytes: the resident set's high-water mark
}

// Delta is what a process did between two samples.
type Delta struct {
	Elapsed    time.Duration
	CPU        time.Duration
	WriteBytes int64
	PeakRSS    int64 // the later sample's high-water mark
}

// Sub returns what happened from s0 to s.
func (s Sample) Sub(s0 Sample) Delta {
	return Delta{
		Elapsed:    s.At.Sub(s0.At),
		CPU:        s.CPU - s0.CPU,
		WriteBytes: s.WriteBytes - s0.WriteBytes,
		PeakRSS:    s.PeakRSS,
	}
}

// Read samples process pid.
func Read(pid int) (Sample, error) {
	s := Sample{At: time.Now()}
	cpu, err := readCPU(pid)
	if err != nil {
		return s, err
	}
	s.CPU = cpu
	if s.WriteBytes, err = readIOWriteBytes(pid); err != nil {
		return s, err
	}
	if s.PeakRSS, err = readHWM(pid); err != nil {
		return s, err
	}
	return s, nil
}

// readCPU returns utime+stime of /proc/PID/stat (fields 14 and 15).
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("sysstat: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("sysstat: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("sysstat: /proc/%d/stat: bad CPU times", pid)
	}
	return time.Duration(ut+st) * time.Second / ClockTicks, nil
}

func readIOWriteBytes(pid int) (int64, error) {
	v, err := readKeyed(fmt.Sprintf("/proc/%d/io", pid), "write_bytes:")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

func readHWM(pid int) (int64, error) {
	v, err := readKeyed(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:")
	if err != nil {
		return 0, err
	}
	kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	return kb << 10, err
}

// readKeyed returns the value after key on the line of path that starts
// with it, trimmed.
func readKeyed(path, key string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			return strings.TrimSpace(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("sysstat: %s: no %q", path, key)
}

// LoadAverage returns the 1-minute load average, or -1 when unknown.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// CPUModel returns the processor's model name from /proc/cpuinfo.
func CPUModel() string {
	v, err := readKeyed("/proc/cpuinfo", "model name")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(strings.TrimPrefix(v, ":"))
}

// Kernel returns the running kernel's release.
func Kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// RSS returns the resident set of process pid now (VmRSS), in bytes.
func RSS(pid int) (int64, error) {
	v, err := readKeyed(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	if err != nil {
		return 0, err
	}
	kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	return kb << 10, err
}
