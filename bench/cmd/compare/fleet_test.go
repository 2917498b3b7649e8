package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ledgemq/ledge/internal/fleetload"
)

func TestFleetIsTakenOutOfTheWorkloadList(t *testing.T) {
	for _, c := range []struct {
		in, rest string
		fleet    bool
	}{
		{"fleet", "none", true},
		{"sync-1k,fleet", "sync-1k", true},
		{"all", "all", false},
	} {
		rest, fleet := splitFleet(c.in)
		if rest != c.rest || fleet != c.fleet {
			t.Errorf("splitFleet(%q) = %q, %v; want %q, %v", c.in, rest, fleet, c.rest, c.fleet)
		}
	}
}

func TestFleetReportGivesRatiosWithinPairs(t *testing.T) {
	runs := []fleetRun{
		{System: "ledge", Devices: 20, Pair: 0, Connected: 20, P99us: 4000, CPUPer1000: 0.5,
			DatagramsPerRec: 3.5, RcvbufDrops: 120, GCPerMinute: 1.5, GCPauseMs: 2.25, Busy: 30, BusyPerMinute: 60},
		{System: "nats-tls", Devices: 20, Pair: 0, Connected: 20, P99us: 2000, CPUPer1000: 1,
			DatagramsPerRec: 0.25},
	}
	md := fleetMarkdown(fleetload.Params{Duration: time.Second}.Defaults(), runs)
	for _, want := range []string{
		"## 20 devices",
		"| connected | 20 | 20 | 1.00 |",
		"| produce p99 (ms) | 4 | 2 | 2.00 |",
		"| server CPU-s per 1,000 records | 0.5 | 1 | 0.50 |",
		"| UDP datagrams sent per record (the machine's) | 3.5 | 0.25 | 14.00 |",
		"| datagrams dropped for a full receive buffer | 120 | 0 | – |",
		"| busy answers a minute (the devices') | 60 | 0 | – |",
		"| node collections a minute (Ledge's /metrics) | 1.5 | 0 | – |",
		"| node GC stop-the-world pauses, total (ms) | 2.25 | 0 | – |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
