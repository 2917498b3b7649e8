package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ledgemq/ledge/internal/fleetload"
)

// fleetMetric is one row of a fleet table.
type fleetMetric struct {
	name string
	get  func(fleetRun) float64
	unit string
}

var fleetMetrics = []fleetMetric{
	{"connected", func(r fleetRun) float64 { return float64(r.Connected) }, ""},
	{"held at the end", func(r fleetRun) float64 { return float64(r.Held) }, ""},
	{"set-up rate (conn/s)", func(r fleetRun) float64 { return r.SetupPerSec }, ""},
	{"set-up time (s)", func(r fleetRun) float64 { return r.SetupSec }, ""},
	{"records acknowledged", func(r fleetRun) float64 { return float64(r.Records) }, ""},
	{"produce p50 (ms)", func(r fleetRun) float64 { return float64(r.P50us) / 1e3 }, ""},
	{"produce p99 (ms)", func(r fleetRun) float64 { return float64(r.P99us) / 1e3 }, ""},
	{"produce p99.9 (ms)", func(r fleetRun) float64 { return float64(r.P999us) / 1e3 }, ""},
	{"commands delivered", func(r fleetRun) float64 { return float64(r.CmdDelivered) }, ""},
	{"command p50 (ms)", func(r fleetRun) float64 { return float64(r.CmdP50us) / 1e3 }, ""},
	{"command p99 (ms)", func(r fleetRun) float64 { return float64(r.CmdP99us) / 1e3 }, ""},
	{"parked polls woken per command (Ledge's metric)", func(r fleetRun) float64 { return r.WakeupsPerCmd }, ""},
	{"UDP datagrams sent per record (the machine's)", func(r fleetRun) float64 { return r.DatagramsPerRec }, ""},
	{"datagrams dropped for a full receive buffer", func(r fleetRun) float64 { return float64(r.RcvbufDrops) }, ""},
	{"busy answers a minute (the devices')", func(r fleetRun) float64 { return r.BusyPerMinute }, ""},
	{"node collections a minute (Ledge's /metrics)", func(r fleetRun) float64 { return r.GCPerMinute }, ""},
	{"node GC stop-the-world pauses, total (ms)", func(r fleetRun) float64 { return r.GCPauseMs }, ""},
	{"server CPU-s per 1,000 records", func(r fleetRun) float64 { return r.CPUPer1000 }, ""},
	{"load generator CPU-s (measured phase)", func(r fleetRun) float64 { return r.LoadCPUSec }, ""},
	{"load generator CPU-s per 1,000 records", func(r fleetRun) float64 {
		if r.Records == 0 {
			return 0
		}
		return r.LoadCPUSec / float64(r.Records) * 1000
	}, ""},
	{"server RSS before the fleet (MB)", func(r fleetRun) float64 { return r.BaseRSSMB }, ""},
	{"server RSS, fleet connected and idle (MB)", func(r fleetRun) float64 { return r.IdleRSSMB }, ""},
	{"server RSS per connection, idle (KB)", func(r fleetRun) float64 { return r.RSSPerConnKB }, ""},
	{"server peak RSS (MB)", func(r fleetRun) float64 { return r.PeakRSSMB }, ""},
	{"errors", func(r fleetRun) float64 { return float64(r.Errors) }, ""},
	{"load average at start", func(r fleetRun) float64 { return r.LoadAvg }, ""},
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func fmtFleet(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// fleetMarkdown is the fleet report: per device count, each metric for
// Ledge and JetStream TLS (medians over pairs) and Ledge ÷ JetStream TLS
// (the median of the ratios within pairs).
func fleetMarkdown(p fleetload.Params, runs []fleetRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Fleet: devices on one node, Ledge and JetStream TLS\n\n")
	fmt.Fprintf(&b, "Each device: its own connection (Ledge: QUIC with a token of its own; JetStream: TLS), %d B records every %v ± %.0f %% "+
		"to one of %d partitions/streams, and a long poll for commands (Ledge: a consumer of partition i mod %d of the commands topic "+
		"for its own key, woken only by a command with that key; JetStream: a subscription to its own subject cmd.i, "+
		"the command published to a stream). %.0f commands a second to random devices. "+
		"Settle %v, warm-up %v, measured %v. Produce latency from each record's scheduled send time; command latency from the write "+
		"to the device's poll returning. Server on its CPUs, load generator (every device) on the other.\n\n",
		p.Size, p.Interval, p.Jitter*100, p.Partitions, p.CmdPartitions, p.CmdRate, p.Settle, p.Warmup, p.Duration)
	var ns []int
	for _, r := range runs {
		if !slices.Contains(ns, r.Devices) {
			ns = append(ns, r.Devices)
		}
	}
	for _, n := range ns {
		fmt.Fprintf(&b, "## %d devices\n\n| | Ledge | JetStream TLS | Ledge ÷ JetStream TLS |\n|---|---:|---:|---:|\n", n)
		for _, m := range fleetMetrics {
			var l, j, ratios []float64
			byPair := map[int][2]*fleetRun{}
			for i := range runs {
				r := &runs[i]
				if r.Devices != n {
					continue
				}
				e := byPair[r.Pair]
				if r.System == "ledge" {
					l = append(l, m.get(*r))
					e[0] = r
				} else {
					j = append(j, m.get(*r))
					e[1] = r
				}
				byPair[r.Pair] = e
			}
			for _, e := range byPair {
				if e[0] != nil && e[1] != nil && m.get(*e[1]) != 0 {
					ratios = append(ratios, m.get(*e[0])/m.get(*e[1]))
				}
			}
			ratio := "–"
			if len(ratios) > 0 {
				ratio = fmt.Sprintf("%.2f", median(ratios))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", m.name, fmtFleet(median(l)), fmtFleet(median(j)), ratio)
		}
		for _, r := range runs {
			if r.Devices == n && r.Err != "" {
				fmt.Fprintf(&b, "\n%s (pair %d): %s\n", r.System, r.Pair, r.Err)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
