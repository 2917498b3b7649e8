package report

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/bench/internal/ceiling"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5}, 5},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing is not NaN")
	}
}

// The ratio of a cell is the median of the ratios within pairs, not the
// ratio of the medians: a pair slowed down as a whole cancels out.
func TestRatiosAreTakenWithinPairs(t *testing.T) {
	c := &Cell{ID: "T0/async-1k", Net: "loopback", Runs: []Run{
		{System: "ledge", Pair: 0, Msgs: 1, MsgsPerSec: 200, CPUSecGB: 1},
		{System: "nats-tls", Pair: 0, Msgs: 1, MsgsPerSec: 100, CPUSecGB: 2},
		{System: "ledge", Pair: 1, Msgs: 1, MsgsPerSec: 20, CPUSecGB: 1},
		{System: "nats-tls", Pair: 1, Msgs: 1, MsgsPerSec: 10, CPUSecGB: 2},
		{System: "ledge", Pair: 2, Msgs: 1, MsgsPerSec: 90, CPUSecGB: 1},
		{System: "nats-tls", Pair: 2, Msgs: 1, MsgsPerSec: 30, CPUSecGB: 2},
		{System: "nats-tls", Pair: 3, Err: "boom"},
	}}
	c.Summarize()
	r := c.Ratios["nats-tls"]
	if r.N != 3 || r.MsgsPerSec != 2 || r.CPUSecGB != 0.5 {
		t.Fatalf("ratios %+v, want 3 pairs, 2× msgs/s, 0.5× CPU", r)
	}
	s := c.Summary["nats-tls"]
	if s.N != 3 || s.Failed != 1 || s.MsgsPerSec != 30 || s.FirstErr != "boom" {
		t.Fatalf("summary %+v", s)
	}
}

func TestTargetsAndOutputs(t *testing.T) {
	cell := func(id string, ledge, nats Run) *Cell {
		ledge.System, nats.System = "ledge", "nats-tls"
		ledge.Msgs, nats.Msgs = 1, 1
		return &Cell{ID: id, Net: "loopback", Tier: id[:2], Workload: id[3:], Latency: strings.Contains(id, "sync"), Runs: []Run{ledge, nats}}
	}
	r := &Report{
		Params:   Params{Systems: []string{"ledge", "nats-tls"}},
		Ceilings: []ceiling.Set{{QUICMsgsPerSec: 400000, QUICBytesPerSec: 400e6, FsyncBytesPerSec: 200e6}},
		Cells: []*Cell{
			cell("T0/async-1k", Run{MsgsPerSec: 300000, MBPerSec: 300, CPUSecGB: 2}, Run{MsgsPerSec: 100000, CPUSecGB: 4}),
			cell("T1/async-1k", Run{MsgsPerSec: 50000, MBPerSec: 50, CPUSecGB: 3}, Run{MsgsPerSec: 10000, CPUSecGB: 3}),
			cell("T0/sync-1k", Run{P50us: 100, P99us: 300, P999us: 500}, Run{P50us: 90, P99us: 200, P999us: 400}),
		},
	}
	for _, c := range r.Cells {
		c.Summarize()
	}
	r.MedianCeiling()
	r.EvaluateTargets()
	got := map[string]Target{}
	for _, tg := range r.Targets {
		got[tg.Name] = tg
	}
	check := func(name string, known, met bool) {
		t.Helper()
		tg, ok := got[name]
		if !ok {
			t.Fatalf("no target %q", name)
		}
		if tg.Known != known || tg.Met != met {
			t.Errorf("%s: known %v met %v (got %.2f), want known %v met %v", name, tg.Known, tg.Met, tg.Got, known, met)
		}
	}
	check("T0 async produce 1 KiB vs raw QUIC ceiling", true, true)                // 0.75
	check("T1 async produce 1 KiB vs 64 KiB write+fdatasync ceiling", true, false) // 0.25
	check("T0 async produce 1 KiB vs JetStream TLS", true, true)                   // 3×
	check("T1 async produce 1 KiB vs JetStream TLS", true, false)                  // 5×
	check("T0 one-at-a-time 1 KiB p50 vs JetStream TLS", true, true)               // 1.11×
	check("T0 one-at-a-time 1 KiB p99 vs JetStream TLS", true, false)              // 1.5×
	check("Replay 1 KiB vs JetStream TLS", false, false)

	dir := t.TempDir()
	if err := r.WriteJSON(filepath.Join(dir, "r.json")); err != nil {
		t.Fatal(err)
	}
	charts, err := r.WriteCharts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) == 0 {
		t.Fatal("no charts")
	}
	if err := r.WriteMarkdown(filepath.Join(dir, "r.md"), charts); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "r.md"))
	for _, want := range []string{"| T0 async-1k | 300,000 |", "3.00×", "**missed**"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

// Where the raw QUIC stream was also measured placed as the servers are,
// the ceiling targets are judged against it, in the workload's direction.
func TestCeilingTargetsUsePlacedStream(t *testing.T) {
	r := &Report{
		Params: Params{Systems: []string{"ledge", "nats-tls"}},
		Ceilings: []ceiling.Set{{QUICMsgsPerSec: 400000, QUICBytesPerSec: 409.6e6,
			PlacedQUICInBytesPerSec: 512e6, PlacedQUICOutBytesPerSec: 300e6}},
		Cells: []*Cell{
			{ID: "T0/async-1k", Net: "loopback", Tier: "T0", Workload: "async-1k", Runs: []Run{
				{System: "ledge", Msgs: 1, MsgsPerSec: 300000, MBPerSec: 307.2}, {System: "nats-tls", Msgs: 1, MsgsPerSec: 100000}}},
			{ID: "T0/replay-1k", Net: "loopback", Tier: "T0", Workload: "replay-1k", Runs: []Run{
				{System: "ledge", Msgs: 1, MsgsPerSec: 250000, MBPerSec: 256}, {System: "nats-tls", Msgs: 1, MsgsPerSec: 100000}}},
		},
	}
	for _, c := range r.Cells {
		c.Summarize()
	}
	r.MedianCeiling()
	r.EvaluateTargets()
	for _, tg := range r.Targets {
		switch tg.Name {
		case "T0 async produce 1 KiB vs raw QUIC ceiling":
			// 0.75 of the whole-machine stream, 0.60 of the placed one.
			if tg.Met || tg.Got < 0.59 || tg.Got > 0.61 || !strings.Contains(tg.Detail, "placed") {
				t.Errorf("%s: got %.2f met %v (%s), want 0.60 against the placed stream", tg.Name, tg.Got, tg.Met, tg.Detail)
			}
		case "Replay 1 KiB vs raw QUIC ceiling":
			// 0.63 of the whole-machine stream, 0.85 of the placed one.
			if !tg.Met || tg.Got < 0.84 || tg.Got > 0.86 {
				t.Errorf("%s: got %.2f met %v (%s), want 0.85 against the placed stream", tg.Name, tg.Got, tg.Met, tg.Detail)
			}
		}
	}
}

// TestKafkaTarget: the Kafka listener's target is its share of the SDK's
// msgs/s, the inverse of the Ledge ÷ Kafka ratio.
func TestKafkaTarget(t *testing.T) {
	c := &Cell{ID: "T0/async-1k", Net: "loopback", Tier: "T0", Workload: "async-1k", Runs: []Run{
		{System: "ledge", Msgs: 1, MsgsPerSec: 100000}, {System: "kafka", Msgs: 1, MsgsPerSec: 85000},
	}}
	r := &Report{Params: Params{Systems: []string{"ledge", "kafka"}}, Cells: []*Cell{c}}
	c.Summarize()
	r.EvaluateTargets()
	for _, tg := range r.Targets {
		if tg.Name == "T0 async produce 1 KiB, Kafka listener vs SDK" {
			if !tg.Known || !tg.Met || math.Abs(tg.Got-0.85) > 1e-9 {
				t.Fatalf("target %+v, want met at 0.85", tg)
			}
			return
		}
	}
	t.Fatal("no Kafka target")
}

// TestLargeRecordTargets: the 16 KiB, 64 KiB and 1 MiB cells are judged
// against JetStream TLS, and the 64 KiB produce and replay against the
// raw stream placed as the servers.
func TestLargeRecordTargets(t *testing.T) {
	cell := func(id string, ledgeMBs, natsMBs float64) *Cell {
		return &Cell{ID: id, Net: "loopback", Tier: id[:2], Workload: id[3:], Runs: []Run{
			{System: "ledge", Msgs: 1, MsgsPerSec: ledgeMBs, MBPerSec: ledgeMBs},
			{System: "nats-tls", Msgs: 1, MsgsPerSec: natsMBs, MBPerSec: natsMBs}}}
	}
	r := &Report{
		Params:   Params{Systems: []string{"ledge", "nats-tls"}},
		Ceilings: []ceiling.Set{{QUICBytesPerSec: 900e6, PlacedQUICInBytesPerSec: 800e6, PlacedQUICOutBytesPerSec: 1000e6, SeqWriteBPS: 2000e6}},
		Cells: []*Cell{
			cell("T0/async-16k", 600, 300),  // 2×
			cell("T0/async-64k", 640, 500),  // 1.28×, 0.80 of the placed stream
			cell("T1/async-1m", 400, 100),   // 4×
			cell("T0/replay-64k", 950, 500), // 0.95 of the placed stream
		},
	}
	for _, c := range r.Cells {
		c.Summarize()
	}
	r.MedianCeiling()
	r.EvaluateTargets()
	want := map[string]struct{ known, met bool }{
		"T0 async produce 16 KiB vs JetStream TLS":                          {true, true},
		"T0 async produce 64 KiB vs JetStream TLS":                          {true, false},
		"T0 async produce 1 MiB vs JetStream TLS":                           {false, false},
		"T1 async produce 1 MiB vs JetStream TLS":                           {true, true},
		"T0 async produce 64 KiB vs raw QUIC ceiling placed as the servers": {true, false},
		"Replay 64 KiB vs raw QUIC ceiling placed as the servers":           {true, true},
	}
	seen := 0
	for _, tg := range r.Targets {
		w, ok := want[tg.Name]
		if !ok {
			continue
		}
		seen++
		if tg.Known != w.known || tg.Met != w.met {
			t.Errorf("%s: known %v met %v (got %.2f, %s), want known %v met %v", tg.Name, tg.Known, tg.Met, tg.Got, tg.Detail, w.known, w.met)
		}
	}
	if seen != len(want) {
		t.Fatalf("%d of the %d large-record targets reported", seen, len(want))
	}
}
