package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/bench/internal/ceiling"
	"github.com/ledgemq/ledge/bench/internal/report"
)

// TestRoundTripCeilingsBesideSync1k: the one-at-a-time round trips,
// measured with the other ceilings before each pair, show in the
// ceilings table as medians over the pairs that measured them (a pair
// whose TLS round trip failed does not drag the median to zero), and
// the T0 sync-1k targets give Ledge's latency as a multiple of the raw
// QUIC round trip and JetStream TLS's as one of the TLS/TCP round trip.
func TestRoundTripCeilingsBesideSync1k(t *testing.T) {
	rep := report.Report{
		Params: report.Params{Pairs: 2, Systems: []string{"ledge", "nats-tls"}},
		Ceilings: []ceiling.Set{
			{QUICMsgsPerSec: 300000, QUICBytesPerSec: 300e6,
				PlacedQUICRoundTrip: ceiling.RoundTrip{N: 30000, P50us: 90, P99us: 130, P999us: 400},
				PlacedTLSRoundTrip:  ceiling.RoundTrip{N: 40000, P50us: 70, P99us: 100, P999us: 300}},
			{QUICMsgsPerSec: 300000, QUICBytesPerSec: 300e6,
				PlacedQUICRoundTrip: ceiling.RoundTrip{N: 28000, P50us: 100, P99us: 150, P999us: 1500}},
		},
		Cells: []*report.Cell{{ID: "T0/sync-1k", Net: "loopback", Tier: "T0", Workload: "sync-1k", Size: 1024, Producers: 1, Latency: true,
			Runs: []report.Run{
				{System: "ledge", Pair: 0, Msgs: 25000, MsgsPerSec: 5000, P50us: 190, P99us: 280, P999us: 900},
				{System: "nats-tls", Pair: 0, Msgs: 28000, MsgsPerSec: 5600, P50us: 175, P99us: 250, P999us: 800},
				{System: "ledge", Pair: 1, Msgs: 25000, MsgsPerSec: 5000, P50us: 190, P99us: 280, P999us: 900},
				{System: "nats-tls", Pair: 1, Msgs: 28000, MsgsPerSec: 5600, P50us: 175, P99us: 250, P999us: 800},
			}}},
	}
	dir := t.TempDir()
	if err := rep.WriteJSON(filepath.Join(dir, "results.json")); err != nil {
		t.Fatal(err)
	}
	if err := rerender(filepath.Join(dir, "results.json"), dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"| one-at-a-time round trip, raw quic-go stream placed as the servers: 1 KiB there, 32 B back | p50 95 µs, p99 140 µs, p99.9 950 µs | 90/130/400, 100/150/1,500 (p50/p99/p99.9) |",
		"| the same over TLS 1.3 on TCP (JetStream TLS's transport), for reference | p50 70 µs, p99 100 µs, p99.9 300 µs | 70/100/300, — (p50/p99/p99.9) |",
		"2 pairs; Ledge 190 µs = 2.00× the raw QUIC round trip's 95 µs; JetStream TLS 175 µs = 2.50× the TLS/TCP round trip's 70 µs",
		"2 pairs; Ledge 280 µs = 2.00× the raw QUIC round trip's 140 µs; JetStream TLS 250 µs = 2.50× the TLS/TCP round trip's 100 µs",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	// The round trip has no disk under it: the T1 rows do not carry it.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| T1 one-at-a-time") && strings.Contains(line, "round trip") {
			t.Errorf("a T1 target beside the round trip: %s", line)
		}
	}
	// results.json keeps every pair's round trips and their medians.
	if b, err = os.ReadFile(filepath.Join(dir, "results.json")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"placed_quic_round_trip"`, `"placed_tls_tcp_round_trip"`, `"p999_us": 950`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("results.json lacks %s", want)
		}
	}
}
