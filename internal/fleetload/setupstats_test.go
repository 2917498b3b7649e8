package fleetload

import (
	"strings"
	"testing"
)

// Two readings of a node's /metrics around a fleet's set-up: 1,000
// devices, of which the node refused some dials and evicted others
// (dialed again), and asked some to prove their address.
const (
	setupBefore = `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1.25
ledge_connections_accepted_total 1
ledge_connections_address_validations_total 0
ledge_connections_evicted_total 0
ledge_connections_refused_total{reason="handshakes"} 0
ledge_connections_refused_total{reason="limit"} 0
`
	setupAfter = `process_cpu_seconds_total 4.75
ledge_connections_accepted_total 1051
ledge_connections_address_validations_total 300
ledge_connections_evicted_total 50
ledge_connections_refused_total{reason="handshakes"} 700
ledge_connections_refused_total{reason="limit"} 20
ledge_connections_refused_total{reason="shutdown"} 0
`
)

func TestSetupStatsFromMetrics(t *testing.T) {
	before, err := parseSetup(strings.NewReader(setupBefore))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseSetup(strings.NewReader(setupAfter))
	if err != nil {
		t.Fatal(err)
	}
	want := SetupStats{CPUSeconds: 3.5, Accepted: 1050, Refused: 720, Evicted: 50, Validations: 300}
	if got := after.Sub(before); got != want {
		t.Errorf("set-up = %+v, want %+v (refusals of every reason added up)", got, want)
	}
	if _, err := parseSetup(strings.NewReader("ledge_connections_accepted_total 1\n")); err == nil {
		t.Error("metrics without the process's CPU parsed")
	}
}
