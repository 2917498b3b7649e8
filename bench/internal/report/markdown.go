package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ledgemq/ledge/bench/internal/ceiling"
)

// systemTitle is how a system is named in tables and charts.
func systemTitle(s string) string {
	switch s {
	case "ledge":
		return "Ledge"
	case "nats-tls":
		return "JetStream TLS"
	case "nats":
		return "JetStream plain"
	case "kafka":
		return "Kafka listener (plain TCP)"
	}
	return s
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteMarkdown writes the report's tables.
func (r *Report) WriteMarkdown(path string, charts []string) error {
	var b strings.Builder
	r.markdown(&b, charts)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func (r *Report) markdown(w io.Writer, charts []string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	kind := "full"
	if r.Params.Quick {
		kind = "quick (harness smoke run: too short to judge speed)"
	}
	p("# Ledge vs NATS JetStream — %s run\n\n", kind)
	p("Run %s → %s (%s). Commit %s.\n\n", r.Started.Format(time.RFC3339), r.Finished.Format(time.RFC3339),
		r.Finished.Sub(r.Started).Round(time.Second), r.Env.Commit)
	p("## Machine and parameters\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s × %d |\n| kernel | %s |\n| Go | %s |\n| NATS server | %s (embedded, cmd/natsd) |\n", r.Env.CPU, r.Env.CPUs, r.Env.Kernel, r.Env.Go, r.Env.NATSServer)
	p("| data directories | %s |\n| CPU layout | %s |\n| GOMAXPROCS | servers %d, load generator %d |\n", r.Env.FileSystem, r.Env.Layout, r.Env.ServerProcs, r.Env.LoadProcs)
	p("| load average (1 min) | %.2f at start, %.2f at end |\n", r.Env.LoadAvgStart, r.Env.LoadAvgEnd)
	pp := r.Params
	p("| pairs per cell | %d, interleaved, the order rotating each pair |\n", pp.Pairs)
	if pp.WindowBytes > 0 {
		p("| in-flight window | %d messages per producer (both systems), and at most %s of payload (%d messages of 256 KiB, %d of 1 MiB) |\n",
			pp.Window, bytesStr(int64(pp.WindowBytes)), min(pp.Window, pp.WindowBytes/(256<<10)), min(pp.Window, pp.WindowBytes/(1<<20)))
	} else {
		p("| in-flight window | %d messages per producer (both systems) |\n", pp.Window)
	}
	if pp.SustainedBytes > 0 {
		p("| sustained | every run moves %s per producer after a %.1f s warm-up (no fixed measured time); pairs in twos, the second in the reverse order of the first |\n", bytesStr(pp.SustainedBytes), pp.WarmupSec)
	} else {
		p("| warm-up / measured | %.1f s / %.1f s per run |\n", pp.WarmupSec, pp.DurationSec)
	}
	p("| payloads | seeded random bytes (seed %d), no keys, %s |\n", pp.Seed, pp.Compression)
	bounds := ""
	if pp.LedgeBatchBytes > 0 && pp.LedgeFlightBytes > 0 {
		bounds = fmt.Sprintf(" and %s (a larger record alone), at most %s of batches in flight per partition", bytesStr(int64(pp.LedgeBatchBytes)), bytesStr(int64(pp.LedgeFlightBytes)))
	}
	p("| Ledge producer | batches of up to %d records%s, linger %s, idempotent %v, one QUIC stream per partition |\n", pp.LedgeBatch, bounds, pp.LedgeLinger, pp.LedgeIdempotent)
	p("| JetStream producer | %s |\n", pp.NATSBatch)
	p("| replay | %s of the cell's messages (1 KiB or 64 KiB), read from the start after a server restart; Ledge polls of %d MiB, JetStream ordered consumer pulling %d messages, at most 16 MiB |\n",
		bytesStr(pp.ReplayBytes), pp.LedgePollBytes>>20, pp.NATSReplayPull)
	if pp.FilterTags > 0 {
		p("| filtered replay | the replay's log, each message a JSON document naming one of %d sites in turn (`{\"seq\":5,\"site\":\"s5\",\"data\":\"...\"}`), read from the start keeping site s0 (1 in %d): Ledge runs the filter plugin %s on the node over every poll; JetStream has the site in the subject too (bench.0.s5) and filters its ordered consumer by subject; MB/s and CPU per GB count the payload delivered |\n",
			pp.FilterTags, pp.FilterTags, pp.FilterPlugin)
	}
	p("| open loop | 1 KiB at %.0f msgs/s (T0) and %.0f msgs/s (T1); latency from the scheduled send time |\n", pp.RateT0, pp.RateT1)
	p("| tiers | T0: JetStream default file store (sync_interval 2 min) vs Ledge durability `none`; T1: JetStream `sync_interval: always` vs Ledge `always` |\n")
	for _, n := range r.Env.Notes {
		p("\n> %s\n", n)
	}

	if len(r.Ceilings) > 0 {
		r.ceilingsAndTargets(w)
	}
	for _, net := range []string{"loopback", "wan"} {
		cells := r.cellsOn(net)
		if len(cells) == 0 {
			continue
		}
		title := "Loopback"
		if net == "wan" {
			title = fmt.Sprintf("WAN-like link (%.0f ms RTT, %g %% loss each way)", r.Params.WANRTTms, r.Params.WANLossPct)
			p("\n## WAN-like run\n\nLink: %s. Servers in a network namespace, the load generator outside it; "+
				"%d pairs of %.0f s runs, T0 only, within a budget of %.0f s.\n", r.WAN, r.Params.WANPairs, r.Params.WANDurationSec, r.Params.WANBudgetSeconds)
			if r.WANRawTCP > 0 || r.WANRawQUIC > 0 {
				p("\nCeilings over this link, same run (one raw stream of 1 KiB writes, timed until the far end has read everything): "+
					"**TCP %.2f MB/s**, **quic-go %.2f MB/s** (Ledge's windows).\n", r.WANRawTCP/1e6, r.WANRawQUIC/1e6)
			}
			for _, n := range r.WANNotes {
				p("\n> %s\n", n)
			}
		}
		r.tables(w, title, cells)
	}
	if r.WAN != "" && !r.WANPassed {
		p("\n## WAN-like run\n\nSkipped: %s\n", r.WAN)
	}
	if len(charts) > 0 {
		p("\n## Charts\n\n")
		for _, ch := range charts {
			p("![%s](%s)\n\n", strings.TrimSuffix(filepath.Base(ch), filepath.Ext(ch)), filepath.Base(ch))
		}
	}
	p("\nHow to read this: see bench/README.md. Ratios are Ledge ÷ the other system, the median of the per-pair ratios; " +
		"above 1 is better for Ledge in throughput, below 1 is better for Ledge in latency, CPU, disk and memory.\n")
}

func (r *Report) cellsOn(net string) []*Cell {
	var out []*Cell
	for _, c := range r.Cells {
		if c.Net == net {
			out = append(out, c)
		}
	}
	return out
}

func (r *Report) systems() []string {
	return r.Params.Systems
}

func (r *Report) tables(w io.Writer, title string, cells []*Cell) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	sys := r.systems()
	others := []string{}
	for _, s := range sys {
		if s != Reference {
			others = append(others, s)
		}
	}

	p("\n## %s: throughput (median of runs)\n\n| cell |", title)
	for _, s := range sys {
		p(" %s msgs/s | %s MB/s |", systemTitle(s), systemTitle(s))
	}
	for _, o := range others {
		p(" Ledge ÷ %s |", systemTitle(o))
	}
	p("\n|---|")
	p("%s\n", strings.Repeat("---:|", 2*len(sys)+len(others)))
	for _, c := range cells {
		p("| %s |", cellTitle(c))
		for _, s := range sys {
			sm := c.Summary[s]
			p(" %s | %s |", numOr(sm.MsgsPerSec, sm), mbOr(sm.MBPerSec, sm))
		}
		for _, o := range others {
			p(" %s |", ratioStr(c.Ratios[o].MsgsPerSec))
		}
		p("\n")
	}

	p("\n## %s: latency in µs, p50 / p99 / p99.9 (median of runs)\n\n| cell |", title)
	for _, s := range sys {
		p(" %s |", systemTitle(s))
	}
	for _, o := range others {
		p(" Ledge ÷ %s p50 / p99 / p99.9 |", systemTitle(o))
	}
	p("\n|---|%s\n", strings.Repeat("---:|", len(sys)+len(others)))
	for _, c := range cells {
		p("| %s |", cellTitle(c))
		for _, s := range sys {
			sm := c.Summary[s]
			if sm.N == 0 {
				p(" %s |", failed(sm))
				continue
			}
			if sm.P50us == 0 {
				p(" — |")
				continue
			}
			p(" %s / %s / %s |", num(sm.P50us), num(sm.P99us), num(sm.P999us))
		}
		for _, o := range others {
			x := c.Ratios[o]
			p(" %s / %s / %s |", ratioStr(x.P50), ratioStr(x.P99), ratioStr(x.P999))
		}
		p("\n")
	}

	p("\n## %s: server resources (median of runs)\n\nCPU-s/GB: server CPU seconds (user+system, /proc/PID/stat) per 10⁹ payload bytes. Disk: bytes the server sent to storage (/proc/PID/io write_bytes) per payload byte. RSS: the server's peak resident set (VmHWM), MB.\n\n| cell |", title)
	for _, s := range sys {
		p(" %s CPU-s/GB | disk B/B | RSS MB |", systemTitle(s))
	}
	for _, o := range others {
		p(" Ledge ÷ %s CPU |", systemTitle(o))
	}
	p("\n|---|%s\n", strings.Repeat("---:|", 3*len(sys)+len(others)))
	for _, c := range cells {
		p("| %s |", cellTitle(c))
		for _, s := range sys {
			sm := c.Summary[s]
			if sm.N == 0 {
				p(" %s | | |", failed(sm))
				continue
			}
			p(" %.2f | %.2f | %.0f |", sm.CPUSecGB, sm.DiskPerB, sm.PeakRSSMB)
		}
		for _, o := range others {
			p(" %s |", ratioStr(c.Ratios[o].CPUSecGB))
		}
		p("\n")
	}
	var errs []string
	for _, c := range cells {
		for _, s := range sys {
			if sm := c.Summary[s]; sm.Failed > 0 {
				errs = append(errs, fmt.Sprintf("- %s, %s: %d of %d runs failed: %s", cellTitle(c), systemTitle(s), sm.Failed, sm.Failed+sm.N, oneLine(sm.FirstErr)))
			}
		}
	}
	if len(errs) > 0 {
		p("\nFailed runs:\n\n%s\n", strings.Join(errs, "\n"))
	}
}

func cellTitle(c *Cell) string {
	s := c.Tier + " " + c.Workload
	if c.Rate > 0 {
		s += fmt.Sprintf(" @%s/s", num(c.Rate))
	}
	return s
}

func failed(s Summary) string {
	if s.Failed > 0 {
		return "failed"
	}
	return "—"
}

func numOr(v float64, s Summary) string {
	if s.N == 0 {
		return failed(s)
	}
	return num(v)
}

func mbOr(v float64, s Summary) string {
	if s.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", v)
}

func ratioStr(v float64) string {
	if math.IsNaN(v) || v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}

// num formats v with thousands separators and no decimals.
func num(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func bytesStr(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func (r *Report) ceilingsAndTargets(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\n## Ceilings (same run, median of %d)\n\n", len(r.Ceilings))
	c := r.Ceiling
	p("| ceiling | median | all measurements |\n|---|---|---|\n")
	all := func(f func(i int) string) string {
		s := make([]string, len(r.Ceilings))
		for i := range r.Ceilings {
			s[i] = f(i)
		}
		return strings.Join(s, ", ")
	}
	p("| raw quic-go stream, 1 KiB writes, loopback | %s msgs/s = %.1f MB/s | %s |\n", num(c.QUICMsgsPerSec), c.QUICBytesPerSec/1e6,
		all(func(i int) string { return num(r.Ceilings[i].QUICMsgsPerSec) }))
	if c.PlacedQUICInBytesPerSec > 0 || c.PlacedQUICOutBytesPerSec > 0 {
		p("| raw quic-go stream placed as the servers, towards the server | %.1f MB/s | %s |\n", c.PlacedQUICInBytesPerSec/1e6,
			all(func(i int) string { return fmt.Sprintf("%.1f", r.Ceilings[i].PlacedQUICInBytesPerSec/1e6) }))
		p("| raw quic-go stream placed as the servers, from the server | %.1f MB/s | %s |\n", c.PlacedQUICOutBytesPerSec/1e6,
			all(func(i int) string { return fmt.Sprintf("%.1f", r.Ceilings[i].PlacedQUICOutBytesPerSec/1e6) }))
	}
	if c.PlacedQUICOwnInBytesPerSec > 0 || c.PlacedQUICOwnOutBytesPerSec > 0 {
		p("| for reference, not a ceiling: the same through quic-go's own sockets, towards the server | %.1f MB/s | %s |\n", c.PlacedQUICOwnInBytesPerSec/1e6,
			all(func(i int) string { return fmt.Sprintf("%.1f", r.Ceilings[i].PlacedQUICOwnInBytesPerSec/1e6) }))
		p("| for reference, not a ceiling: the same through quic-go's own sockets, from the server | %.1f MB/s | %s |\n", c.PlacedQUICOwnOutBytesPerSec/1e6,
			all(func(i int) string { return fmt.Sprintf("%.1f", r.Ceilings[i].PlacedQUICOwnOutBytesPerSec/1e6) }))
	}
	for _, rt := range []struct {
		what string
		get  func(ceiling.Set) ceiling.RoundTrip
	}{
		{"one-at-a-time round trip, raw quic-go stream placed as the servers: 1 KiB there, 32 B back", func(c ceiling.Set) ceiling.RoundTrip { return c.PlacedQUICRoundTrip }},
		{"the same over TLS 1.3 on TCP (JetStream TLS's transport), for reference", func(c ceiling.Set) ceiling.RoundTrip { return c.PlacedTLSRoundTrip }},
	} {
		if m := rt.get(c); m.N > 0 {
			p("| %s | p50 %s µs, p99 %s µs, p99.9 %s µs | %s (p50/p99/p99.9) |\n", rt.what, num(float64(m.P50us)), num(float64(m.P99us)), num(float64(m.P999us)), all(func(i int) string {
				x := rt.get(r.Ceilings[i])
				if x.N == 0 {
					return "—"
				}
				return num(float64(x.P50us)) + "/" + num(float64(x.P99us)) + "/" + num(float64(x.P999us))
			}))
		}
	}
	p("| sequential write (page cache) | %.0f MB/s | %s |\n", c.SeqWriteBPS/1e6, all(func(i int) string { return fmt.Sprintf("%.0f", r.Ceilings[i].SeqWriteBPS/1e6) }))
	p("| sequential write + final fdatasync | %.0f MB/s | %s |\n", c.SeqWriteSyncBPS/1e6, all(func(i int) string { return fmt.Sprintf("%.0f", r.Ceilings[i].SeqWriteSyncBPS/1e6) }))
	p("| 64 KiB write + fdatasync | %s ops/s = %.1f MB/s (p50 %d µs, p99 %d µs) | %s |\n", num(c.FsyncOpsPerSec), c.FsyncBytesPerSec/1e6, c.FsyncP50us, c.FsyncP99us,
		all(func(i int) string { return num(r.Ceilings[i].FsyncOpsPerSec) }))

	p("\n## Targets (issues 9 and 36)\n\n| target | want | got | |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		verdict := "**missed**"
		switch {
		case !t.Known:
			verdict = "not measured"
		case t.Met:
			verdict = "met"
		}
		got := "—"
		if t.Known {
			got = fmt.Sprintf("%.2f", t.Got)
		}
		p("| %s | %s | %s (%s) | %s |\n", t.Name, t.Want, got, t.Detail, verdict)
	}

}
