package report

import (
	"fmt"
	"math"
)

// Cell ids of the large-record targets.
const (
	idAsync16kT0 = "T0/async-16k"
	idAsync64kT0 = "T0/async-64k"
	idAsync1mT0  = "T0/async-1m"
	idAsync16kT1 = "T1/async-16k"
	idAsync64kT1 = "T1/async-64k"
	idAsync1mT1  = "T1/async-1m"
	idReplay64k  = "T0/replay-64k"
)

// largeRecordTargets are the targets of big records: cameras, audio, log
// bundles and firmware send 16 KiB to 1 MiB at a time, where a margin
// over JetStream at 1 KiB says nothing. atLeast appends a target, as in
// EvaluateTargets.
func (r *Report) largeRecordTargets(atLeast func(name, want string, got, need float64, known bool, detail string)) {
	for _, t := range []struct {
		name, id string
		need     float64
	}{
		{"T0 async produce 16 KiB vs JetStream TLS", idAsync16kT0, 1.5},
		{"T0 async produce 64 KiB vs JetStream TLS", idAsync64kT0, 1.5},
		{"T0 async produce 1 MiB vs JetStream TLS", idAsync1mT0, 1.5},
		{"T1 async produce 16 KiB vs JetStream TLS", idAsync16kT1, 3},
		{"T1 async produce 64 KiB vs JetStream TLS", idAsync64kT1, 3},
		{"T1 async produce 1 MiB vs JetStream TLS", idAsync1mT1, 3},
	} {
		x, ok := r.ratioVsTLS(t.id)
		atLeast(t.name, fmt.Sprintf("≥ %g× msgs/s (median of pair ratios)", t.need), x.MsgsPerSec, t.need, ok, pairsNote(x, ok))
	}

	c := r.Ceiling
	const async64k = "T0 async produce 64 KiB vs raw QUIC ceiling placed as the servers"
	if s, ok := r.ledgeSummary(idAsync64kT0); ok && c.PlacedQUICInBytesPerSec > 0 {
		bps := c.PlacedQUICInBytesPerSec
		got := s.MBPerSec * 1e6
		detail := fmt.Sprintf("%.1f of %.1f MB/s", s.MBPerSec, bps/1e6)
		if c.SeqWriteBPS > 0 {
			both := 1 / (1/bps + 1/c.SeqWriteBPS)
			detail += fmt.Sprintf("; the stream and sequential page-cache writes on one CPU allow %.1f MB/s together, %.2f of that", both/1e6, got/both)
		}
		atLeast(async64k, "≥ 0.85 of the ceiling (bytes/s)", got/bps, 0.85, true, detail)
	} else {
		atLeast(async64k, "≥ 0.85 of the ceiling (bytes/s)", math.NaN(), 0.85, false, "not measured")
	}
	const replay64k = "Replay 64 KiB vs raw QUIC ceiling placed as the servers"
	if s, ok := r.ledgeSummary(idReplay64k); ok && c.PlacedQUICOutBytesPerSec > 0 {
		bps := c.PlacedQUICOutBytesPerSec
		atLeast(replay64k, "≥ 0.90 of the ceiling (bytes/s)", s.MBPerSec*1e6/bps, 0.90, true,
			fmt.Sprintf("%.1f of %.1f MB/s", s.MBPerSec, bps/1e6))
	} else {
		atLeast(replay64k, "≥ 0.90 of the ceiling (bytes/s)", math.NaN(), 0.90, false, "not measured")
	}
}

// ledgeSummary is Ledge's summary in the loopback cell id, when it ran.
func (r *Report) ledgeSummary(id string) (Summary, bool) {
	c := r.Find("loopback", id)
	if c == nil {
		return Summary{}, false
	}
	s, ok := c.Summary[Reference]
	return s, ok && s.N > 0
}

// ratioVsTLS is Ledge ÷ JetStream TLS in the loopback cell id, when both
// ran in a pair.
func (r *Report) ratioVsTLS(id string) (Ratios, bool) {
	c := r.Find("loopback", id)
	if c == nil {
		return Ratios{}, false
	}
	x, ok := c.Ratios[vsTLS]
	return x, ok && x.N > 0
}
