package main

import (
	"testing"

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
