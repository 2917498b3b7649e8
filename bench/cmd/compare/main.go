package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ledgemq/ledge/bench/internal/ceiling"
	"github.com/ledgemq/ledge/bench/internal/ledgeclient"
	"github.com/ledgemq/ledge/bench/internal/natsclient"
	"github.com/ledgemq/ledge/bench/internal/report"
	"github.com/ledgemq/ledge/bench/internal/server"
	"github.com/ledgemq/ledge/bench/internal/sysstat"
	"github.com/ledgemq/ledge/bench/internal/wan"
	"github.com/ledgemq/ledge/sdk"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// run is the whole command: settle the settings, build and place the
// servers, run the fleets and the cells, and write what they measured.
func run() error {
	o := parseFlags()
	if o.render != "" {
		return rerender(o.render, o.out)
	}
	s, ws, withFleet, err := o.settings()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h, repoRoot, cleanup, err := newHarness(ctx, o, s)
	if err != nil {
		return err
	}
	defer cleanup()
	if withFleet {
		if err := h.runFleets(ctx, o.out); err != nil || len(ws) == 0 {
			return err
		}
	}

	rep := &report.Report{Started: time.Now(), Params: reportParams(s), Env: environment(repoRoot, h.workDir, h.bins, h.layout)}
	printHeader(rep)
	if o.loopback {
		h.runLoopback(ctx, rep, ws, o.out)
	}
	if s.wan && ctx.Err() == nil {
		h.runWAN(ctx, rep, ws)
	} else if !s.wan {
		rep.WAN = ""
	}
	rep.Env.LoadAvgEnd = sysstat.LoadAverage()
	if err := finish(rep, o.out, true); err != nil {
		return err
	}
	h.printOutcome(rep, o.out)
	return runErrors(ctx, rep)
}

// newHarness makes the directories, builds the servers, places the
// load generator on its CPUs and returns the harness with the root of
// the repository and what cleans up after the run.
func newHarness(ctx context.Context, o options, s settings) (h *harness, repoRoot string, cleanup func(), err error) {
	cleanups := []func(){}
	cleanup = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	benchRoot, err := findBenchRoot()
	if err != nil {
		return nil, "", cleanup, err
	}
	repoRoot = filepath.Dir(benchRoot)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, "", cleanup, err
	}
	workDir := o.workDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "ledge-bench-*"); err != nil {
			return nil, "", cleanup, err
		}
		if !o.keep {
			cleanups = append(cleanups, func() { os.RemoveAll(workDir) })
		}
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, "", cleanup, err
	}
	// Servers run in their data directories: every path must be absolute.
	if workDir, err = filepath.Abs(workDir); err != nil {
		return nil, "", cleanup, err
	}

	fmt.Printf("building the servers (go build ../cmd/ledge, ./cmd/natsd)...\n")
	bins, err := server.Build(ctx, repoRoot, benchRoot, filepath.Join(workDir, "bin"), o.ledgeBin, o.natsdBin)
	if err != nil {
		return nil, "", cleanup, err
	}
	if err := o.profileDirs(&bins); err != nil {
		return nil, "", cleanup, err
	}
	layout := sysstat.PlanLayout(o.pin)
	if layout.Pinned {
		if err := sysstat.PinSelf(layout.Load); err != nil {
			layout = sysstat.Layout{Server: layout.All(), Load: layout.All(), Note: "pinning the load generator failed: " + err.Error()}
		}
	}
	// Server logs outlive the data directories, for a look after a failure.
	logDir, err := os.MkdirTemp("", "ledge-bench-logs-*")
	if err != nil {
		return nil, "", cleanup, err
	}
	h = &harness{s: s, bins: bins, layout: layout, workDir: workDir, logDir: logDir,
		keep: o.keep, out: os.Stdout, live: map[*server.Proc]bool{}, profileDir: o.profileDir, loadProfileDir: o.loadProfile}
	cleanups = append(cleanups, h.killAll)
	return h, repoRoot, cleanup, nil
}

// runLoopback runs the loopback cells pair after pair, the ceilings
// measured again before each pair, and writes partial results after
// every pair: an interrupted run still leaves what it measured.
func (h *harness) runLoopback(ctx context.Context, rep *report.Report, ws []workload, out string) {
	cells := plan(ws, h.s.tiers, "loopback", h.s.rates)
	byID := map[string]*report.Cell{}
	for _, cs := range cells {
		c := newCell(cs)
		byID[cs.net+"|"+cs.id()] = c
		rep.Cells = append(rep.Cells, c)
	}
	lo := netSpec{name: "loopback", host: "127.0.0.1"}
	for pair := range h.s.pairs {
		if ctx.Err() != nil || len(cells) == 0 {
			break
		}
		c, err := h.measureCeilings(ctx)
		if err != nil {
			fmt.Printf("ceilings: %v\n", err)
		} else {
			rep.Ceilings = append(rep.Ceilings, c)
			fmt.Printf("[pair %d/%d] ceilings: quic %s msgs/s (%.0f MB/s; placed: %.0f MB/s in, %.0f out; quic-go's own socket %.0f in, %.0f out), seq write %.0f MB/s, 64 KiB write+fdatasync %s/s (%.1f MB/s)\n",
				pair+1, h.s.pairs, fmtNum(c.QUICMsgsPerSec), c.QUICBytesPerSec/1e6, c.PlacedQUICInBytesPerSec/1e6, c.PlacedQUICOutBytesPerSec/1e6,
				c.PlacedQUICOwnInBytesPerSec/1e6, c.PlacedQUICOwnOutBytesPerSec/1e6, c.SeqWriteBPS/1e6, fmtNum(c.FsyncOpsPerSec), c.FsyncBytesPerSec/1e6)
			q, t := c.PlacedQUICRoundTrip, c.PlacedTLSRoundTrip
			fmt.Printf("[pair %d/%d] ceilings: one-at-a-time round trip p50/p99/p99.9 µs: raw quic %d/%d/%d, TLS/TCP %d/%d/%d\n",
				pair+1, h.s.pairs, q.P50us, q.P99us, q.P999us, t.P50us, t.P99us, t.P999us)
		}
		for ci, cs := range cells {
			h.runPair(ctx, lo, cs, byID[cs.net+"|"+cs.id()], pair, ci)
		}
		finish(rep, out, false)
	}
}

// printOutcome prints where the results are and each target's verdict.
func (h *harness) printOutcome(rep *report.Report, out string) {
	fmt.Printf("\nresults: %s\n", filepath.Join(out, "results.md"))
	for _, t := range rep.Targets {
		v := "MISSED"
		switch {
		case !t.Known:
			v = "not measured"
		case t.Met:
			v = "met"
		}
		fmt.Printf("  %-62s %-12s %6.2f  %s\n", t.Name, v, t.Got, t.Detail)
	}
	fmt.Printf("server logs: %s\n", h.logDir)
}

// runErrors is the command's outcome: interrupted, runs that failed, or
// none.
func runErrors(ctx context.Context, rep *report.Report) error {
	if ctx.Err() != nil {
		return errors.New("interrupted; partial results written")
	}
	failed := 0
	for _, c := range rep.Cells {
		for _, r := range c.Runs {
			if r.Err != "" {
				failed++
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d runs failed (see the report and the server logs)", failed)
	}
	return nil
}

// runPair runs every system once in cell cs, in the order order gives.
func (h *harness) runPair(ctx context.Context, ns netSpec, cs cellSpec, cell *report.Cell, pair, ci int) {
	for pos, sys := range order(h.s.systems, pair, ci, h.s.sustained) {
		if ctx.Err() != nil {
			return
		}
		if !cs.runs(sys, h.s.quick) {
			continue
		}
		r := h.runCell(ctx, ns, cs, sys, pair, pos)
		if ctx.Err() != nil {
			// Cut short by an interrupt or a time budget: not a measurement.
			return
		}
		cell.Runs = append(cell.Runs, r)
		fmt.Println(progressLine(ns, cs, r, pair, h.s.pairs))
	}
}

func (h *harness) measureCeilings(ctx context.Context) (ceiling.Set, error) {
	s, err := h.wholeMachineCeilings(ctx)
	if err != nil {
		return s, err
	}
	h.roundTrips(ctx, &s)
	if !h.layout.Pinned {
		return s, nil
	}
	// The raw QUIC stream again, placed as a comparison's server and load
	// generator are: each end held to the CPUs (and the GOMAXPROCS) the
	// systems measured get.
	// A failure leaves these at zero (reported as not measured) and keeps
	// the others.
	// Then both again through quic-go's own sockets, for reference.
	for _, own := range []bool{false, true} {
		in, out, which := &s.PlacedQUICInBytesPerSec, &s.PlacedQUICOutBytesPerSec, ""
		if own {
			in, out, which = &s.PlacedQUICOwnInBytesPerSec, &s.PlacedQUICOwnOutBytesPerSec, " (quic-go's own socket)"
		}
		spec := server.RawSpec{Proto: "quic", Host: "127.0.0.1", CPUs: h.layout.Server, Procs: h.layout.ServerProcs(), OwnSocket: own}
		if *in, err = placed(ctx, h, spec, func(ctx context.Context, addr string) (float64, error) {
			return ceiling.QUICTo(ctx, addr, h.s.ceilQUIC, own)
		}); err != nil {
			fmt.Printf("ceilings: placed raw quic%s, towards the server: %v\n", which, err)
		}
		spec.Source = h.s.ceilQUIC
		if *out, err = placed(ctx, h, spec, func(ctx context.Context, addr string) (float64, error) {
			return ceiling.QUICFrom(ctx, addr, own)
		}); err != nil {
			fmt.Printf("ceilings: placed raw quic%s, from the server: %v\n", which, err)
		}
	}
	return s, nil
}

// wholeMachineCeilings measures every ceiling in this process with every
// CPU, as client and server of a comparison run have them together.
func (h *harness) wholeMachineCeilings(ctx context.Context) (ceiling.Set, error) {
	if h.layout.Pinned {
		if err := sysstat.PinSelf(h.layout.All()); err != nil {
			return ceiling.Set{}, err
		}
		defer sysstat.PinSelf(h.layout.Load)
	}
	return ceiling.Measure(ctx, ceiling.Options{Dir: h.workDir, QUICFor: h.s.ceilQUIC, SeqBytes: h.s.ceilSeq, FsyncFor: h.s.ceilFsync, ChunkSize: 1 << 20})
}

// roundTrips measures the one-at-a-time round trips, a raw quic-go
// stream's and TLS on TCP's, placed as a sync-1k cell's server and load
// generator are (wherever that is when nothing is pinned), each for a
// run's warm-up and measured time so that its percentiles rest on as
// many round trips as the cell's. A failure leaves one at zero (reported
// as not measured) and keeps the others.
func (h *harness) roundTrips(ctx context.Context, s *ceiling.Set) {
	warmup, measured := h.s.roundTripTimes()
	for _, rt := range []struct {
		proto string // of cmd/rawsink and ceiling.RoundTrips
		into  *ceiling.RoundTrip
	}{{"quic", &s.PlacedQUICRoundTrip}, {"tls", &s.PlacedTLSRoundTrip}} {
		spec := server.RawSpec{Proto: rt.proto, Host: "127.0.0.1", Procs: h.layout.ServerProcs()}
		if h.layout.Pinned {
			spec.CPUs = h.layout.Server
		}
		var err error
		if *rt.into, err = placed(ctx, h, spec, func(ctx context.Context, addr string) (ceiling.RoundTrip, error) {
			return ceiling.RoundTrips(ctx, rt.proto, addr, warmup, measured)
		}); err != nil {
			fmt.Printf("ceilings: one-at-a-time round trip over %s: %v\n", rt.proto, err)
		}
	}
}

// placed runs measure against a rawsink started as spec says, within
// the longest of the ceilings' times and a minute.
func placed[T any](ctx context.Context, h *harness, spec server.RawSpec, measure func(ctx context.Context, addr string) (T, error)) (T, error) {
	var zero T
	addr, stop, err := server.StartRaw(ctx, h.bins, spec)
	if err != nil {
		return zero, err
	}
	defer stop()
	warmup, measured := h.s.roundTripTimes()
	ctx, cancel := context.WithTimeout(ctx, max(h.s.ceilQUIC, warmup+measured)+time.Minute)
	defer cancel()
	return measure(ctx, addr)
}

func (h *harness) runWAN(ctx context.Context, rep *report.Report, selected []workload) {
	var ws []workload
	for _, w := range selected {
		for _, name := range wanWorkloads {
			if w.name == name {
				ws = append(ws, w)
			}
		}
	}
	if len(ws) == 0 {
		rep.WAN = "no WAN workload selected (they are " + strings.Join(wanWorkloads, ", ") + ")"
		return
	}
	n, err := wan.Setup(ctx, wan.Config{RTT: h.s.wanRTT, Loss: h.s.wanLoss, Seed: h.s.seed, TCPCongestion: h.s.wanTCPCC})
	if err != nil {
		rep.WAN = err.Error()
		fmt.Printf("\nWAN-like run skipped: %v\n", err)
		return
	}
	defer n.Close()
	rep.WAN = n.Mode
	rep.WANPassed = true
	fmt.Printf("\nWAN-like run over %s: %v RTT, %g%% loss each way, budget %v\n", n.Mode, h.s.wanRTT, h.s.wanLoss*100, h.s.wanBudget)
	ctx, cancel := context.WithTimeout(ctx, h.s.wanBudget)
	defer cancel()
	for _, proto := range []string{"tcp", "quic"} {
		bps, err := h.linkCeiling(ctx, proto)
		if err != nil {
			rep.WANNotes = append(rep.WANNotes, fmt.Sprintf("raw %s ceiling over the link failed: %v", proto, err))
			continue
		}
		fmt.Printf("[wan] ceiling: raw %s stream %.2f MB/s\n", proto, bps/1e6)
		if proto == "tcp" {
			rep.WANRawTCP = bps
		} else {
			rep.WANRawQUIC = bps
		}
	}
	ns := netSpec{name: "wan", host: wan.ServerAddr, netns: wan.Namespace}
	cells := plan(ws, []server.Tier{server.T0}, "wan", h.s.rates)
	var rc []*report.Cell
	for _, cs := range cells {
		c := newCell(cs)
		rc = append(rc, c)
		rep.Cells = append(rep.Cells, c)
	}
	save := h.s.pairs
	h.s.pairs = h.s.wanPairs
	defer func() { h.s.pairs = save }()
	perRun := h.s.wanWarmup + h.s.wanDuration + 10*time.Second
	for pair := range h.s.wanPairs {
		for ci, cs := range cells {
			if dl, _ := ctx.Deadline(); ctx.Err() != nil || time.Until(dl) < time.Duration(len(h.s.systems))*perRun {
				rep.WAN += fmt.Sprintf("; stopped at its time budget of %v", h.s.wanBudget)
				return
			}
			h.runPair(ctx, ns, cs, rc[ci], pair, ci)
		}
	}
	if fw, dr := n.Stats(); fw > 0 {
		rep.WAN += fmt.Sprintf("; %d packets forwarded, %d dropped", fw, dr)
	}
}

// linkCeiling times one raw stream to a sink inside the WAN namespace.
func (h *harness) linkCeiling(ctx context.Context, proto string) (float64, error) {
	addr, stop, err := server.StartSink(ctx, h.bins, proto, wan.ServerAddr, wan.Namespace)
	if err != nil {
		return 0, err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, h.s.wanDuration+time.Minute)
	defer cancel()
	return ceiling.Stream(ctx, proto, addr, h.s.wanDuration, wan.TCPCongestionControl(h.s.wanTCPCC))
}

func newCell(cs cellSpec) *report.Cell {
	return &report.Cell{ID: cs.id(), Net: cs.net, Tier: string(cs.tier), Workload: cs.name, Size: cs.size,
		Producers: cs.producers, Rate: cs.rate, Latency: cs.latency}
}

// finish summarizes and writes the report; charts only at the end.
func finish(rep *report.Report, out string, final bool) error {
	if !final || rep.Finished.IsZero() || rep.Finished.Before(rep.Started) || time.Since(rep.Finished) < time.Minute {
		rep.Finished = time.Now()
	}
	for _, c := range rep.Cells {
		c.Summarize()
	}
	rep.MedianCeiling()
	rep.EvaluateTargets()
	var charts []string
	if final {
		var err error
		if charts, err = rep.WriteCharts(out); err != nil {
			fmt.Printf("charts: %v\n", err)
		}
	}
	if err := rep.WriteJSON(filepath.Join(out, "results.json")); err != nil {
		return err
	}
	return rep.WriteMarkdown(filepath.Join(out, "results.md"), charts)
}

func progressLine(ns netSpec, cs cellSpec, r report.Run, pair, pairs int) string {
	head := fmt.Sprintf("[pair %d/%d] %-8s %-16s %-9s", pair+1, pairs, ns.name, cs.id(), r.System)
	if r.Err != "" && r.Msgs == 0 {
		return head + " FAILED: " + oneLine(r.Err)
	}
	line := fmt.Sprintf("%s %9s msgs/s %8.1f MB/s", head, fmtNum(r.MsgsPerSec), r.MBPerSec)
	if r.P50us > 0 {
		line += fmt.Sprintf("  p50 %s p99 %s p99.9 %s µs", fmtNum(float64(r.P50us)), fmtNum(float64(r.P99us)), fmtNum(float64(r.P999us)))
	}
	line += fmt.Sprintf("  cpu %.2f s/GB disk %.2f B/B rss %.0f MB  load %.1f", r.CPUSecGB, r.DiskPerB, r.PeakRSSMB, r.LoadAvg)
	if r.RestartSec > 0 {
		line += fmt.Sprintf("  restart %.1fs", r.RestartSec)
	}
	if r.Err != "" {
		line += "  ERROR: " + oneLine(r.Err)
	}
	return line
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " | ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func fmtNum(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}

// findBenchRoot returns the directory of the bench module: the working
// directory or one of its parents.
func findBenchRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/ledgemq/ledge/bench\n") {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("run compare from the bench directory (no bench go.mod above %s)", dir)
		}
	}
}

func reportParams(s settings) report.Params {
	var sys []string
	for _, k := range s.systems {
		sys = append(sys, string(k))
	}
	p := report.Params{
		Quick: s.quick, Pairs: s.pairs, Systems: sys, Window: s.window, WindowBytes: windowBytes,
		WarmupSec: s.warmup.Seconds(), DurationSec: s.duration.Seconds(), ReplayBytes: s.replayBytes,
		RateT0: s.rates[server.T0], RateT1: s.rates[server.T1], Seed: s.seed,
		LedgeBatch: ledgeclient.BatchRecords, LedgeBatchBytes: sdk.DefaultMaxBatchBytes, LedgeFlightBytes: sdk.DefaultMaxInFlightBytes,
		LedgeLinger: time.Duration(ledgeclient.Linger).String(), LedgeIdempotent: true,
		LedgePollBytes: ledgeclient.PollMaxBytes,
		NATSBatch:      fmt.Sprintf("one message per publish (no client batching), PublishAsync with at most %d pending, no message ids", s.window),
		NATSReplayPull: natsclient.ReplayPullMessages,
		Compression:    "no compression on either side",
		FilterTags:     FilterTags,
		FilterPlugin:   "sdk/plugin/examples/jsonfilter (match=native: one host call per poll decides the batch)",
	}
	if s.sustained {
		p.SustainedBytes = s.sustainedBytes
	}
	if s.wan {
		p.WANRTTms, p.WANLossPct = float64(s.wanRTT.Milliseconds()), s.wanLoss*100
		p.WANDurationSec, p.WANPairs, p.WANBudgetSeconds = s.wanDuration.Seconds(), s.wanPairs, s.wanBudget.Seconds()
	}
	return p
}

func environment(repoRoot, workDir string, bins server.Binaries, l sysstat.Layout) report.Env {
	e := report.Env{
		CPU: sysstat.CPUModel(), CPUs: runtime.NumCPU(), Kernel: sysstat.Kernel(), Go: runtime.Version(),
		Layout: l.String(), ServerProcs: l.ServerProcs(), LoadProcs: len(l.Load),
		FileSystem: fsType(workDir), LoadAvgStart: sysstat.LoadAverage(),
	}
	if b, err := exec.Command("git", "-C", repoRoot, "rev-parse", "--short", "HEAD").Output(); err == nil {
		e.Commit = strings.TrimSpace(string(b))
		if st, err := exec.Command("git", "-C", repoRoot, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			e.Commit += " with uncommitted changes"
		}
	} else {
		e.Commit = "unknown"
	}
	if b, err := exec.Command(bins.NATSD, "--version").Output(); err == nil {
		e.NATSServer = "v" + strings.TrimSpace(string(b))
	}
	if !l.Pinned {
		e.Notes = append(e.Notes, "Servers and load generator share every CPU: "+l.Note+".")
	}
	if e.LoadAvgStart > 0.5 {
		e.Notes = append(e.Notes, fmt.Sprintf("The machine was busy when the run began (load average %.2f on %d CPUs): other work shares these cores, so absolute figures are noisy; the ratios within pairs are the robust figures.", e.LoadAvgStart, e.CPUs))
	}
	return e
}

func fsType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown file system"
	}
	switch uint32(st.Type) {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs (fsync is free: T1 means nothing here)"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("file system 0x%x", uint32(st.Type))
}

func printHeader(rep *report.Report) {
	e, p := rep.Env, rep.Params
	fmt.Printf("machine: %s × %d, kernel %s, %s, commit %s, NATS server %s\n", e.CPU, e.CPUs, e.Kernel, e.Go, e.Commit, e.NATSServer)
	fmt.Printf("layout: %s; GOMAXPROCS servers %d, load generator %d; data on %s; load average %.2f\n", e.Layout, e.ServerProcs, e.LoadProcs, e.FileSystem, e.LoadAvgStart)
	fmt.Printf("params: %d pairs, window %d, warm-up %.2fs, measured %.2fs, replay %d MiB, open loop %.0f/%.0f msgs/s (T0/T1), seed %d\n",
		p.Pairs, p.Window, p.WarmupSec, p.DurationSec, p.ReplayBytes>>20, p.RateT0, p.RateT1, p.Seed)
	if p.SustainedBytes > 0 {
		fmt.Printf("        sustained: %d MiB per producer per run instead of the measured time, pairs in both orders\n", p.SustainedBytes>>20)
	}
	fmt.Printf("        Ledge: batches ≤ %d records and ≤ %d KiB, ≤ %d MiB in flight a partition, linger %s, idempotent, %s; JetStream: %s\n",
		p.LedgeBatch, p.LedgeBatchBytes>>10, p.LedgeFlightBytes>>20, p.LedgeLinger, p.Compression, p.NATSBatch)
	if slices.Contains(p.Systems, string(server.Kafka)) {
		fmt.Printf("        Kafka listener: franz-go over plain TCP, batches ≤ %d records, linger 0, idempotent (5 requests in flight), no compression; producing workloads only\n", p.LedgeBatch)
	}
}

// rerender rewrites the markdown and the charts from a JSON report.
func rerender(jsonPath, out string) error {
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return err
	}
	if out == "" {
		out = filepath.Dir(jsonPath)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return finish(&rep, out, true)
}
