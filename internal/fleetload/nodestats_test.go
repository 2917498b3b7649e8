package fleetload

import (
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Two /proc/net/snmp samples, as a Linux 6 kernel writes them, a
// measured phase apart.
const (
	snmpBefore = `Ip: Forwarding DefaultTTL InReceives InHdrErrors
Ip: 1 64 1000 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 6417076 13941 4935 6204014 4935 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
`
	snmpAfter = `Ip: Forwarding DefaultTTL InReceives InHdrErrors
Ip: 1 64 2000 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 6767000 13941 5035 6554014 5035 2 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 7 7 7 7 7 7 7 7 7
`
)

func TestDatagramsPerRecordFromSNMP(t *testing.T) {
	before, err := parseSNMP(strings.NewReader(snmpBefore))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseSNMP(strings.NewReader(snmpAfter))
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	want := UDPCounters{InDatagrams: 349924, OutDatagrams: 350000, RcvbufErrors: 100, SndbufErrors: 2}
	if d != want {
		t.Fatalf("difference = %+v, want %+v (the Udp line, not UdpLite's)", d, want)
	}
	r := Result{UDP: d, UDPKnown: true, Records: 100000}
	if got, ok := r.DatagramsPerRecord(); !ok || got != 3.5 {
		t.Errorf("DatagramsPerRecord = %v, %v; want 3.5", got, ok)
	}
	if _, ok := (Result{UDP: d, Records: 100000}).DatagramsPerRecord(); ok {
		t.Error("DatagramsPerRecord known without counters")
	}
	if _, err := parseSNMP(strings.NewReader("Ip: Forwarding\nIp: 1\n")); err == nil {
		t.Error("a sample without Udp lines parsed")
	}
}

// Two readings of a node's /metrics, 90 s apart.
const (
	metricsBefore = `# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.1e-05
go_gc_duration_seconds{quantile="1"} 0.0012
go_gc_duration_seconds_sum 0.25
go_gc_duration_seconds_count 40
go_goroutines 20345
`
	metricsAfter = `go_gc_duration_seconds{quantile="0"} 2.1e-05
go_gc_duration_seconds{quantile="1"} 0.0031
go_gc_duration_seconds_sum 0.2625
go_gc_duration_seconds_count 43
`
)

func TestGCPerMinuteFromMetrics(t *testing.T) {
	a, err := parseGC(strings.NewReader(metricsBefore))
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseGC(strings.NewReader(metricsAfter))
	if err != nil {
		t.Fatal(err)
	}
	r := GCBetween(a, b, 90*time.Second)
	if r.Cycles != 3 || r.PerMinute != 2 {
		t.Errorf("collections = %d, %v a minute; want 3, 2", r.Cycles, r.PerMinute)
	}
	if math.Abs(r.PauseTotal.Seconds()-0.0125) > 1e-9 {
		t.Errorf("pause total = %v, want 12.5ms", r.PauseTotal)
	}
	if _, err := parseGC(strings.NewReader("go_goroutines 3\n")); err == nil {
		t.Error("metrics without go_gc_duration_seconds parsed")
	}
}

// This process's collections are read as a node's in it would be.
func TestProcessGCCountsACollection(t *testing.T) {
	a := ProcessGC()
	runtime.GC()
	b := ProcessGC()
	if b.Cycles <= a.Cycles {
		t.Errorf("cycles %d then %d across a collection", a.Cycles, b.Cycles)
	}
}
