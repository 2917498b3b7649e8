package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportWritesChartsAndNumbers: a run's result becomes the markdown
// report (both throughputs of the same run, the lag through the outage)
// and both charts, in SVG and PNG.
func TestReportWritesChartsAndNumbers(t *testing.T) {
	r := result{
		Started: time.Unix(1_800_000_000, 0).UTC(),
		Config:  config{local: time.Second, forward: time.Second, lag: 4 * time.Second, rateShare: 0.5, sample: time.Second, durability: "interval"}.describe(),
		Machine: map[string]string{"cpus": "2"},
		Local:   throughput{Seconds: 1, ProduceRecords: 600000, ProduceMB: 614.4},
		Forward: throughput{Seconds: 1, ProduceRecords: 90000, ProduceMB: 92.2, ForwardRecords: 85000, ForwardMB: 87},
		Lag: lagRun{Rate: 42500, Seconds: 4, OutageFrom: 1, OutageTo: 2, MaxRecords: 50000, MaxAgeSeconds: 1.2, RecoverySeconds: 0.5,
			Samples: []sample{{T: 0.5}, {T: 1.5, LagRecords: 40000, LagAge: 0.6, KafkaDown: true, State: "backoff"}, {T: 2.5, LagRecords: 100}}},
	}
	dir := t.TempDir()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"uplink-lag.json", "uplink-lag-records.svg", "uplink-lag-records.png", "uplink-lag-age.svg", "uplink-lag-age.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "uplink-lag.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 1. local produce alone (the ceiling) | 1.0 | 600000 |", "| 85000 | 87.0 |", "94% of the concurrent produce rate",
		"| peak lag | 50000 records, 1.2 s |", "| 1.5 | down | backoff |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if err := render(filepath.Join(dir, "uplink-lag.json"), t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
