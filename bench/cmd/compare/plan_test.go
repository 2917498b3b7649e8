package main

import (
	"slices"
	"testing"
	"time"

	"github.com/ledgemq/ledge/bench/internal/server"
)

func TestPlanKeepsReplayToT0(t *testing.T) {
	ws, err := selectWorkloads("async-1k,replay-1k")
	if err != nil {
		t.Fatal(err)
	}
	cells := plan(ws, []server.Tier{server.T0, server.T1}, "loopback", map[server.Tier]float64{})
	var ids []string
	for _, c := range cells {
		ids = append(ids, c.id())
	}
	want := []string{"T0/async-1k", "T0/replay-1k", "T1/async-1k"}
	if len(ids) != len(want) {
		t.Fatalf("cells %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("cells %v, want %v", ids, want)
		}
	}
}

func TestSelectWorkloadsRefusesUnknownNames(t *testing.T) {
	if _, err := selectWorkloads("async-1k,warp-9"); err == nil {
		t.Fatal("unknown workload accepted")
	}
	all, err := selectWorkloads("all")
	if err != nil || len(all) != len(workloads) {
		t.Fatalf("all: %d workloads, %v", len(all), err)
	}
}

func TestWANWorkloadsExist(t *testing.T) {
	for _, name := range wanWorkloads {
		if _, err := selectWorkloads(name); err != nil {
			t.Error(err)
		}
	}
}

// TestKafkaRunsProducingWorkloads: the Kafka column runs every producing
// workload and no replay; a quick run keeps it to async-1k.
func TestKafkaRunsProducingWorkloads(t *testing.T) {
	for _, cs := range plan(workloads, []server.Tier{server.T0}, "loopback", nil) {
		full, quick := cs.runs(server.Kafka, false), cs.runs(server.Kafka, true)
		if want := cs.shape != replay; full != want {
			t.Errorf("%s: Kafka runs %v, want %v", cs.id(), full, want)
		}
		if want := cs.name == "async-1k"; quick != want {
			t.Errorf("%s: Kafka runs in a quick run %v, want %v", cs.id(), quick, want)
		}
		if !cs.runs(server.Ledge, true) || !cs.runs(server.NATSTLS, false) {
			t.Errorf("%s: the other systems do not all run", cs.id())
		}
	}
}

// TestLargeRecordCells: the big-record cells run at both tiers, the
// 64 KiB replay at T0 only, and a producer's window holds at most 32 MiB
// of payload whatever the message size.
func TestLargeRecordCells(t *testing.T) {
	ws, err := selectWorkloads("async-256k,async-1m,replay-64k")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range plan(ws, []server.Tier{server.T0, server.T1}, "loopback", nil) {
		ids = append(ids, c.id())
	}
	want := []string{"T0/async-256k", "T0/async-1m", "T0/replay-64k", "T1/async-256k", "T1/async-1m"}
	if !slices.Equal(ids, want) {
		t.Fatalf("cells %v, want %v", ids, want)
	}
	for name, wantWindow := range map[string]int{"async-1k": 500, "async-64k": 500, "async-256k": 128, "async-1m": 32} {
		w, _ := selectWorkloads(name)
		if got := w[0].window(500); got != wantWindow {
			t.Errorf("%s: window %d, want %d", name, got, wantWindow)
		}
	}
}

// TestSustainedRunsAsyncCellsInBothOrders: a sustained run keeps the
// producing cells, and each system runs once first and once last in
// every two pairs.
func TestSustainedRunsAsyncCellsInBothOrders(t *testing.T) {
	o := options{sustained: true, wls: "all", tiers: "T0", systems: "ledge,nats-tls"}
	s, ws, _, err := o.settings()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range ws {
		if !w.sustained || w.shape != async {
			t.Errorf("%s: sustained %v, shape %v", w.name, w.sustained, w.shape)
		}
		names = append(names, w.name)
	}
	if !slices.Equal(names, sustainedWorkloads) || s.pairs != 2 || s.sustainedBytes < 1<<30 {
		t.Fatalf("workloads %v, %d pairs, %d bytes a run; want %v, 2 pairs, gigabytes", names, s.pairs, s.sustainedBytes, sustainedWorkloads)
	}
	for ci := range 3 {
		first, second := order(s.systems, 0, ci, true), order(s.systems, 1, ci, true)
		if first[0] != second[1] || first[1] != second[0] {
			t.Errorf("cell %d: orders %v then %v, want one the reverse of the other", ci, first, second)
		}
	}
	if _, _, _, err := (options{sustained: true, wls: "replay-1k", tiers: "T0", systems: "ledge"}).settings(); err == nil {
		t.Error("a sustained run of replays alone accepted")
	}
}

// TestOrderRotates: outside a sustained run the first system changes
// from pair to pair.
func TestOrderRotates(t *testing.T) {
	sys := []server.Kind{server.Ledge, server.NATSTLS, server.NATS}
	var firsts []server.Kind
	for pair := range 3 {
		firsts = append(firsts, order(sys, pair, 0, false)[0])
	}
	if !slices.Equal(firsts, sys) {
		t.Fatalf("first systems %v, want %v", firsts, sys)
	}
}

// TestRoundTripCeilingsLastARun: each one-at-a-time round-trip ceiling
// warms up and measures as long as a sync-1k run does, so that its
// percentiles rest on about as many round trips; in a quick run that
// keeps the two of them to about a second.
func TestRoundTripCeilingsLastARun(t *testing.T) {
	for _, quick := range []bool{false, true} {
		s := defaultSettings(quick)
		warmup, measured := s.roundTripTimes()
		if warmup != s.warmup || measured != s.duration {
			t.Errorf("quick %v: round trips %v + %v, a run %v + %v", quick, warmup, measured, s.warmup, s.duration)
		}
		if quick && 2*(warmup+measured) > 2*time.Second {
			t.Errorf("quick: the round trips take %v", 2*(warmup+measured))
		}
	}
	o := options{duration: 20 * time.Second, wls: "sync-1k", tiers: "T0", systems: "ledge,nats-tls"}
	s, _, _, err := o.settings()
	if err != nil {
		t.Fatal(err)
	}
	if _, measured := s.roundTripTimes(); measured != 20*time.Second {
		t.Errorf("--duration 20s: round trips measured for %v", measured)
	}
}
