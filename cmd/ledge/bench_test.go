package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestBenchBoundOfStreamAndWrites: the stream moves 600 MB/s with 1.8
// CPUs busy (3 CPU-s per GB); writing into the page cache costs 2.5 CPU-s
// per GB more. On the same 1.8 CPUs a produce can then move at most
// 1.8 / (3 + 2.5) GB/s, about 327 MB/s, and a run of 300 MB/s reached 92%
// of it. Without a write measurement there is no bound.
func TestBenchBoundOfStreamAndWrites(t *testing.T) {
	r := &benchResult{MBPerSec: 300, Ceiling: &ceilingJSON{MBPerSec: 600, CPUsBusy: 1.8},
		Write: &writeCeiling{CPUSecondsPerGB: 2.5}}
	r.bound()
	if r.Bound == nil || math.Abs(r.Bound.MBPerSec-1800/5.5) > 0.01 || math.Abs(r.Bound.Ratio-300/(1800/5.5)) > 1e-6 {
		t.Fatalf("bound %+v, want %.1f MB/s and a ratio of %.3f", r.Bound, 1800/5.5, 300/(1800/5.5))
	}
	r = &benchResult{MBPerSec: 300, Ceiling: &ceilingJSON{MBPerSec: 600, CPUsBusy: 1.8}}
	if r.bound(); r.Bound != nil {
		t.Fatalf("a bound %+v without a write measurement", r.Bound)
	}
}

// TestBenchProduceReportsItsCeilings: a short produce run against an
// in-process node reports, beside its own figures, the raw stream with
// the CPU it kept busy, the cost of writing new data into the page cache
// beside the log, and the bound of the two.
func TestBenchProduceReportsItsCeilings(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node and two raw QUIC measurements")
	}
	t.Setenv("TMPDIR", t.TempDir())
	t.Chdir(t.TempDir()) // no ./ledge-data: the in-process node
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"bench", "produce", "--count", "3000", "--ceiling-duration", "100ms", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("bench produce: %v\n%s", err, errOut.String())
	}
	var r benchResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if r.Messages != 3000 || r.Errors != 0 {
		t.Fatalf("%d messages acknowledged, %d errors; want 3000 and none", r.Messages, r.Errors)
	}
	if r.Ceiling == nil || r.Ceiling.MBPerSec <= 0 || r.Ceiling.CPUsBusy <= 0 || len(r.Ceiling.Samples) != 2 {
		t.Fatalf("ceiling %+v: want two measurements and the CPU they kept busy", r.Ceiling)
	}
	if r.Write == nil || r.Write.Bytes < writeCeilingChunk || r.Write.MBPerSec <= 0 {
		t.Fatalf("page-cache write %+v: want a measurement of at least one chunk", r.Write)
	}
	if r.Bound == nil || r.Bound.MBPerSec <= 0 || r.Bound.MBPerSec > r.Ceiling.MBPerSec {
		t.Fatalf("bound %+v with a ceiling of %.1f MB/s: want a positive bound below the stream", r.Bound, r.Ceiling.MBPerSec)
	}
}

// TestBenchRefusesABadPollSize: --poll-bytes is checked before anything
// runs, with a reason.
func TestBenchRefusesABadPollSize(t *testing.T) {
	for _, v := range []string{"0", "-1", "lots", "3GiB"} {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"bench", "consume", "--poll-bytes", v, "--server", "127.0.0.1:1"})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--poll-bytes") {
			t.Errorf("--poll-bytes %s: error %v, want one naming the flag", v, err)
		}
	}
}
