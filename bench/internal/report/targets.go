package report

import (
	"fmt"
	"math"

	"github.com/ledgemq/ledge/bench/internal/ceiling"
)

// Cell ids the targets read.
const (
	idAsync1kT0 = "T0/async-1k"
	idAsync1kT1 = "T1/async-1k"
	idReplay    = "T0/replay-1k"
	idSync1kT0  = "T0/sync-1k"
	idSync1kT1  = "T1/sync-1k"
	vsTLS       = "nats-tls"
	vsKafka     = "kafka"
)

// EvaluateTargets fills Targets from the loopback cells and the median
// ceilings.
func (r *Report) EvaluateTargets() {
	r.Targets = nil
	ledge, ratio := r.ledgeSummary, r.ratioVsTLS
	atLeast := func(name, want string, got, need float64, known bool, detail string) {
		known = known && got > 0 && !math.IsNaN(got)
		got = finite(got)
		r.Targets = append(r.Targets, Target{Name: name, Want: want, Got: got, Need: need,
			Met: known && !math.IsNaN(got) && got >= need, Known: known && !math.IsNaN(got), Detail: detail})
	}
	atMost := func(name, want string, got, need float64, known bool, detail string) {
		known = known && got > 0 && !math.IsNaN(got)
		got = finite(got)
		r.Targets = append(r.Targets, Target{Name: name, Want: want, Got: got, Need: need,
			Met: known && !math.IsNaN(got) && got <= need, Known: known && !math.IsNaN(got), Detail: detail})
	}

	c := r.Ceiling
	// Against the raw stream placed as the servers are (its server end on
	// their CPUs, with their GOMAXPROCS, in the workload's direction)
	// where it was measured, else against the whole-machine one; the
	// detail gives the ratio to the whole-machine stream as well.
	quicCeiling := func(placed float64) (float64, string) {
		if placed > 0 {
			return placed, "placed as the servers"
		}
		return c.QUICBytesPerSec, "whole machine"
	}
	if s, ok := ledge(idAsync1kT0); ok && c.QUICBytesPerSec > 0 {
		bps, what := quicCeiling(c.PlacedQUICInBytesPerSec)
		detail := fmt.Sprintf("%.0f of %.0f msgs/s (%s)", s.MsgsPerSec, bps/1024, what)
		if c.PlacedQUICInBytesPerSec > 0 {
			detail += fmt.Sprintf("; %.2f of the whole-machine stream's %.0f", s.MsgsPerSec/c.QUICMsgsPerSec, c.QUICMsgsPerSec)
		}
		detail += ownSocketNote(s.MsgsPerSec*1024, c.PlacedQUICOwnInBytesPerSec)
		if c.SeqWriteBPS > 0 {
			// A produce also writes every byte into the page cache, on the
			// server's CPU, which the raw stream does not: the two
			// ceilings, each a CPU's worth, bound it together.
			both := 1 / (1/bps + 1/c.SeqWriteBPS)
			detail += fmt.Sprintf("; the stream and sequential page-cache writes on one CPU allow %.0f together, %.2f of that", both/1024, s.MsgsPerSec*1024/both)
		}
		atLeast("T0 async produce 1 KiB vs raw QUIC ceiling", "≥ 0.70 of the ceiling (msgs/s)",
			s.MsgsPerSec*1024/bps, 0.70, true, detail)
	} else {
		atLeast("T0 async produce 1 KiB vs raw QUIC ceiling", "≥ 0.70 of the ceiling (msgs/s)", math.NaN(), 0.70, false, "not measured")
	}
	if s, ok := ledge(idReplay); ok && c.QUICBytesPerSec > 0 {
		bps, what := quicCeiling(c.PlacedQUICOutBytesPerSec)
		detail := fmt.Sprintf("%.1f of %.1f MB/s (%s)", s.MBPerSec, bps/1e6, what)
		if c.PlacedQUICOutBytesPerSec > 0 {
			detail += fmt.Sprintf("; %.2f of the whole-machine stream's %.1f", s.MBPerSec*1e6/c.QUICBytesPerSec, c.QUICBytesPerSec/1e6)
		}
		detail += ownSocketNote(s.MBPerSec*1e6, c.PlacedQUICOwnOutBytesPerSec)
		atLeast("Replay 1 KiB vs raw QUIC ceiling", "≥ 0.70 of the ceiling (bytes/s)",
			s.MBPerSec*1e6/bps, 0.70, true, detail)
	} else {
		atLeast("Replay 1 KiB vs raw QUIC ceiling", "≥ 0.70 of the ceiling (bytes/s)", math.NaN(), 0.70, false, "not measured")
	}
	if s, ok := ledge(idAsync1kT1); ok && c.FsyncBytesPerSec > 0 {
		atLeast("T1 async produce 1 KiB vs 64 KiB write+fdatasync ceiling", "≥ 0.50 of the ceiling (bytes/s)",
			s.MBPerSec*1e6/c.FsyncBytesPerSec, 0.50, true,
			fmt.Sprintf("%.1f of %.1f MB/s", s.MBPerSec, c.FsyncBytesPerSec/1e6))
	} else {
		atLeast("T1 async produce 1 KiB vs 64 KiB write+fdatasync ceiling", "≥ 0.50 of the ceiling (bytes/s)", math.NaN(), 0.50, false, "not measured")
	}

	for _, t := range []struct {
		name, id string
		need     float64
	}{
		{"T0 async produce 1 KiB vs JetStream TLS", idAsync1kT0, 2},
		{"T1 async produce 1 KiB vs JetStream TLS", idAsync1kT1, 10},
		{"Replay 1 KiB vs JetStream TLS", idReplay, 2},
	} {
		x, ok := ratio(t.id)
		atLeast(t.name, fmt.Sprintf("≥ %g× msgs/s (median of pair ratios)", t.need), x.MsgsPerSec, t.need, ok, pairsNote(x, ok))
	}
	r.largeRecordTargets(atLeast)
	// The Kafka listener against the SDK over QUIC on the same node: the
	// ratios are the SDK's over Kafka's, so Kafka's share is their inverse.
	for _, t := range []struct{ name, id string }{
		{"T0 async produce 1 KiB, Kafka listener vs SDK", idAsync1kT0},
		{"T1 async produce 1 KiB, Kafka listener vs SDK", idAsync1kT1},
	} {
		var x Ratios
		c := r.Find("loopback", t.id)
		if c != nil {
			x = c.Ratios[vsKafka]
		}
		ok := x.N > 0 && x.MsgsPerSec > 0
		share := math.NaN()
		if ok {
			share = 1 / x.MsgsPerSec
		}
		atLeast(t.name, "≥ 0.80 of the SDK's msgs/s (median of pair ratios)", share, 0.80, ok, pairsNote(x, ok))
	}
	for _, t := range []struct{ name, id string }{
		{"T0 one-at-a-time 1 KiB", idSync1kT0},
		{"T1 one-at-a-time 1 KiB", idSync1kT1},
	} {
		x, ok := ratio(t.id)
		// At T0 nothing but the transport lies under the latency: the
		// detail sets each system beside its transport's round trip.
		var p50, p99 string
		if t.id == idSync1kT0 {
			p50 = r.roundTripNote(t.id, func(s Summary) float64 { return s.P50us }, func(rt ceiling.RoundTrip) int64 { return rt.P50us })
			p99 = r.roundTripNote(t.id, func(s Summary) float64 { return s.P99us }, func(rt ceiling.RoundTrip) int64 { return rt.P99us })
		}
		atMost(t.name+" p50 vs JetStream TLS", "≤ 1.2× JetStream's p50", x.P50, 1.2, ok, pairsNote(x, ok)+p50)
		atMost(t.name+" p99 vs JetStream TLS", "≤ 1.0× JetStream's p99", x.P99, 1.0, ok, pairsNote(x, ok)+p99)
	}
	for _, t := range []struct{ name, id string }{
		{"Server CPU per GB, T0 async 1 KiB", idAsync1kT0},
		{"Server CPU per GB, T1 async 1 KiB", idAsync1kT1},
		{"Server CPU per GB, replay", idReplay},
	} {
		x, ok := ratio(t.id)
		atMost(t.name+" vs JetStream TLS", "≤ 1.0× JetStream TLS's CPU-s/GB", x.CPUSecGB, 1.0, ok, pairsNote(x, ok))
	}
}

// roundTripNote gives the median latency of Ledge and of JetStream TLS
// in loopback cell id (of) as multiples of the one-at-a-time round trip
// of their transports (at), a raw quic-go stream's and TLS on TCP's,
// where those were measured.
func (r *Report) roundTripNote(id string, of func(Summary) float64, at func(ceiling.RoundTrip) int64) string {
	c := r.Find("loopback", id)
	if c == nil {
		return ""
	}
	var note string
	for _, x := range []struct {
		sys, what string
		rt        ceiling.RoundTrip
	}{
		{Reference, "raw QUIC", r.Ceiling.PlacedQUICRoundTrip},
		{vsTLS, "TLS/TCP", r.Ceiling.PlacedTLSRoundTrip},
	} {
		s, ok := c.Summary[x.sys]
		if !ok || s.N == 0 || of(s) <= 0 || x.rt.N == 0 || at(x.rt) <= 0 {
			continue
		}
		note += fmt.Sprintf("; %s %s µs = %.2f× the %s round trip's %s µs", systemTitle(x.sys), num(of(s)), of(s)/float64(at(x.rt)), x.what, num(float64(at(x.rt))))
	}
	return note
}

func pairsNote(x Ratios, ok bool) string {
	if !ok {
		return "not measured"
	}
	return fmt.Sprintf("%d pairs", x.N)
}

// ownSocketNote compares got (bytes/s) with the placed stream through
// quic-go's own sockets, where it was measured: a reference, not a
// ceiling, since Ledge's socket reads coalesced bursts that quic-go's
// does not.
func ownSocketNote(got, own float64) string {
	if own <= 0 {
		return ""
	}
	return fmt.Sprintf("; %.2f of the stream through quic-go's own sockets (%.1f MB/s)", got/own, own/1e6)
}
