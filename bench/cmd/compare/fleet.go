package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ledgemq/ledge/bench/internal/ledgeclient"
	"github.com/ledgemq/ledge/bench/internal/loadgen"
	"github.com/ledgemq/ledge/bench/internal/natsclient"
	"github.com/ledgemq/ledge/bench/internal/server"
	"github.com/ledgemq/ledge/bench/internal/sysstat"
	"github.com/ledgemq/ledge/internal/fleetload"
)

// The fleet workload runs apart from the cells: it is not one of "all"
// (a full fleet run takes most of an hour), and it writes fleet.md and
// fleet.json beside results.md.
var (
	fleetDevices  = flag.String("fleet-devices", "", "fleet: device counts to run (default 1000,5000,10000; quick 20)")
	fleetDuration = flag.Duration("fleet-duration", 0, "fleet: measured time per run (default 30s, quick 2s)")
	fleetPairs    = flag.Int("fleet-pairs", 1, "fleet: pairs (Ledge, JetStream TLS) per device count")
	fleetInterval = flag.Duration("fleet-interval", 0, "fleet: mean time between a device's records (default 1s)")
	fleetProfile  = flag.String("fleet-profile", "", "fleet: write the Ledge node's heap and goroutine profiles at idle connections into this directory")
)

// FleetWorkload is the fleet's name in --workloads.
const FleetWorkload = "fleet"

// splitFleet takes "fleet" out of a workload list: the rest, and whether
// it was there. A list of the fleet alone leaves "none".
func splitFleet(list string) (string, bool) {
	var rest []string
	found := false
	for _, w := range strings.Split(list, ",") {
		if strings.TrimSpace(w) == FleetWorkload {
			found = true
			continue
		}
		rest = append(rest, w)
	}
	if found && len(rest) == 0 {
		return "none", true
	}
	return strings.Join(rest, ","), found
}

// fleetRun is one system's run at one device count.
type fleetRun struct {
	System       string  `json:"system"`
	Devices      int     `json:"devices"`
	Pair         int     `json:"pair"`
	LoadAvg      float64 `json:"load_avg"`
	Connected    int     `json:"connected"`
	Held         int     `json:"held"`
	SetupSec     float64 `json:"setup_sec"`
	SetupPerSec  float64 `json:"setup_per_sec"`
	Sent         int64   `json:"sent"`
	Records      int64   `json:"records"`
	P50us        int64   `json:"produce_p50_us"`
	P99us        int64   `json:"produce_p99_us"`
	P999us       int64   `json:"produce_p999_us"`
	Commands     int64   `json:"commands"`
	CmdDelivered int64   `json:"commands_delivered"`
	CmdP50us     int64   `json:"command_p50_us"`
	CmdP99us     int64   `json:"command_p99_us"`
	// WakeupsPerCmd is the parked polls the node woke per command (Ledge's
	// key polls; 0 where the node does not say).
	WakeupsPerCmd float64 `json:"wakeups_per_command,omitempty"`
	// DatagramsPerRec is the UDP datagrams sent over the measured phase
	// per record, from the machine's counters (/proc/net/snmp): the whole
	// machine's, node and devices alike over loopback (JetStream's TCP
	// leaves only what else the machine sends). RcvbufDrops is the
	// datagrams dropped for a full receive buffer.
	DatagramsPerRec float64 `json:"datagrams_per_record"`
	RcvbufDrops     uint64  `json:"datagrams_dropped_rcvbuf"`
	// GCPerMinute and GCPauseMs are the node's collections a minute and
	// their stop-the-world pauses added up over the measured phase (its
	// /metrics: Ledge's only).
	GCPerMinute float64 `json:"node_gc_per_minute"`
	GCPauseMs   float64 `json:"node_gc_pause_total_ms"`
	// Busy is the busy answers the devices got over the measured phase
	// (Ledge's "busy, retry after"; 0 where the devices do not count
	// them), BusyPerMinute the same a minute.
	Busy          int64   `json:"busy_answers"`
	BusyPerMinute float64 `json:"busy_answers_per_minute"`
	CPUSec        float64 `json:"server_cpu_sec"`
	CPUPer1000    float64 `json:"server_cpu_sec_per_1000_records"`
	LoadCPUSec    float64 `json:"loadgen_cpu_sec"`
	BaseRSSMB     float64 `json:"server_rss_before_mb"`
	IdleRSSMB     float64 `json:"server_rss_idle_fleet_mb"`
	PeakRSSMB     float64 `json:"server_peak_rss_mb"`
	RSSPerConnKB  float64 `json:"server_rss_per_conn_kb"`
	Errors        int64   `json:"errors"`
	Err           string  `json:"error,omitempty"`
}

func fleetParams(quick bool) ([]int, fleetload.Params, error) {
	p := fleetload.Params{Duration: 30 * time.Second, Warmup: 5 * time.Second, Settle: 3 * time.Second}
	list := "1000,5000,10000"
	if quick {
		list = "20"
		p = fleetload.Params{Duration: 2 * time.Second, Warmup: 500 * time.Millisecond, Settle: 500 * time.Millisecond}
	}
	if *fleetDevices != "" {
		list = *fleetDevices
	}
	if *fleetDuration > 0 {
		p.Duration = *fleetDuration
	}
	if *fleetInterval > 0 {
		p.Interval = *fleetInterval
	}
	var ns []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, p, fmt.Errorf("--fleet-devices: %q is not a device count", s)
		}
		ns = append(ns, n)
	}
	p.Seed = 20240917
	return ns, p.Defaults(), nil
}

// runFleets runs the fleet at every device count, Ledge and JetStream TLS
// in turn (the order alternating), and writes fleet.md and fleet.json.
func (h *harness) runFleets(ctx context.Context, out string) error {
	ns, p, err := fleetParams(h.s.quick)
	if err != nil {
		return err
	}
	var runs []fleetRun
	// Ledge and JetStream TLS, as --systems names them (ledge alone for
	// a node's runs without the comparison).
	var systems []server.Kind
	for _, k := range []server.Kind{server.Ledge, server.NATSTLS} {
		if slices.Contains(h.s.systems, k) {
			systems = append(systems, k)
		}
	}
	if len(systems) == 0 {
		return fmt.Errorf("fleet: --systems names neither ledge nor nats-tls")
	}
	for _, n := range ns {
		for pair := range *fleetPairs {
			for pos := range systems {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				sys := systems[(pos+pair+len(runs)/2)%len(systems)]
				p.Devices = n
				r := h.runFleet(ctx, sys, p, pair)
				fmt.Println(fleetLine(r))
				runs = append(runs, r)
				if err := writeFleet(out, p, runs); err != nil {
					return err
				}
			}
		}
	}
	fmt.Printf("\nfleet results: %s\n", filepath.Join(out, "fleet.md"))
	for _, r := range runs {
		if r.Err != "" || r.Errors > 0 {
			return fmt.Errorf("fleet: a run failed or counted errors (see %s)", filepath.Join(out, "fleet.md"))
		}
	}
	return nil
}

// runFleet runs one system's fleet of p.Devices on a fresh server.
func (h *harness) runFleet(ctx context.Context, sys server.Kind, p fleetload.Params, pair int) fleetRun {
	run := fleetRun{System: string(sys), Devices: p.Devices, Pair: pair, LoadAvg: sysstat.LoadAverage()}
	h.mu.Lock()
	h.runs++
	dir := filepath.Join(h.workDir, fmt.Sprintf("fleet-%04d-%s", h.runs, sys))
	h.mu.Unlock()
	if !h.keep {
		defer os.RemoveAll(dir)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute+p.Duration)
	defer cancel()
	fail := func(err error) fleetRun { run.Err = err.Error(); return run }

	// The node admits the fleet: connections and parked polls above N,
	// and no per-source handshake limit (every device dials from
	// 127.0.0.1).
	spec := server.Spec{Kind: sys, Tier: server.T0, DataDir: dir, Host: "127.0.0.1", Procs: h.layout.ServerProcs(), LogDir: h.logDir,
		Env: []string{"LEDGE_QUIC_MAX_CONNS=" + strconv.Itoa(p.Devices+64), "LEDGE_POLLS_MAX_PARKED=" + strconv.Itoa(p.Devices+64),
			"LEDGE_QUIC_SOURCE_HANDSHAKE_RATE=0", "LEDGE_HTTP_PPROF=true"}}
	if h.layout.Pinned {
		spec.CPUs = h.layout.Server
	}
	proc, err := h.start(ctx, spec)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = h.stop(proc) }()
	t := loadgen.Target{Kind: string(sys), Addr: proc.Addr, CAFile: proc.CAFile}
	var fs fleetload.System
	if sys == server.Ledge {
		t.DataDir = filepath.Join(dir, "ledge-data")
		var httpAddr string
		if a := proc.HTTPAddr.Load(); a != nil {
			httpAddr = *a
		}
		fs, err = ledgeclient.Fleet(ctx, t, httpAddr)
	} else {
		fs, err = natsclient.Fleet(ctx, t)
	}
	if err != nil {
		return fail(err)
	}
	defer fs.Close()
	pid := proc.PID()
	if rss, err := sysstat.RSS(pid); err == nil {
		run.BaseRSSMB = float64(rss) / 1e6
	}
	var s0, s1, l0, l1 sysstat.Sample
	hooks := fleetload.Hooks{
		Connected: func() {
			if rss, err := sysstat.RSS(pid); err == nil {
				run.IdleRSSMB = float64(rss) / 1e6
			}
			if sys == server.Ledge && *fleetProfile != "" {
				h.fleetProfiles(proc, p.Devices)
			}
		},
		Begin: func() { s0, _ = proc.Sample(); l0, _ = sysstat.Read(os.Getpid()) },
		End:   func() { s1, _ = proc.Sample(); l1, _ = sysstat.Read(os.Getpid()) },
	}
	res, err := fleetload.Run(ctx, fs, p, hooks)
	if err != nil {
		return fail(err)
	}
	if !proc.Alive() {
		return fail(fmt.Errorf("server exited during the run: %s", proc.LogTail()))
	}
	run.Connected, run.Held = res.Connected, res.Held
	run.SetupSec, run.SetupPerSec = res.Setup.Seconds(), res.SetupRate()
	run.Sent, run.Records = res.Sent, res.Records
	run.P50us, run.P99us, run.P999us = res.Produce.Percentile(50).Microseconds(), res.Produce.Percentile(99).Microseconds(), res.Produce.Percentile(99.9).Microseconds()
	run.Commands, run.CmdDelivered = res.CmdSent, res.CmdDelivered
	run.CmdP50us, run.CmdP99us = res.Command.Percentile(50).Microseconds(), res.Command.Percentile(99).Microseconds()
	if w, ok := res.WakeupsPerCommand(); ok {
		run.WakeupsPerCmd = w
	}
	if d, ok := res.DatagramsPerRecord(); ok {
		run.DatagramsPerRec, run.RcvbufDrops = d, res.UDP.RcvbufErrors
	}
	if b, ok := res.BusyPerMinute(); ok {
		run.Busy, run.BusyPerMinute = res.Busy, b
	}
	if res.GCKnown {
		run.GCPerMinute = res.NodeGC.PerMinute
		run.GCPauseMs = float64(res.NodeGC.PauseTotal) / float64(time.Millisecond)
	}
	d := s1.Sub(s0)
	run.CPUSec = d.CPU.Seconds()
	if res.Records > 0 {
		run.CPUPer1000 = run.CPUSec / float64(res.Records) * 1000
	}
	run.LoadCPUSec = l1.Sub(l0).CPU.Seconds()
	run.PeakRSSMB = float64(d.PeakRSS) / 1e6
	if res.Connected > 0 && run.IdleRSSMB > 0 {
		run.RSSPerConnKB = (run.IdleRSSMB - run.BaseRSSMB) * 1e3 / float64(res.Connected)
	}
	run.Errors = res.Errors
	if res.FirstErr != "" {
		run.Err = res.FirstErr
	}
	return run
}

// fleetProfiles saves the node's heap and goroutine profiles with the
// fleet connected and every poll parked.
func (h *harness) fleetProfiles(proc *server.Proc, n int) {
	addr := proc.HTTPAddr.Load()
	if addr == nil {
		fmt.Println("fleet profile: the node printed no HTTP address")
		return
	}
	if err := os.MkdirAll(*fleetProfile, 0o755); err != nil {
		fmt.Println("fleet profile:", err)
		return
	}
	for _, q := range []struct{ name, path string }{
		{"heap", "/debug/pprof/heap?gc=1"},
		{"goroutine", "/debug/pprof/goroutine"},
		{"goroutine-text", "/debug/pprof/goroutine?debug=1"},
		{"metrics", "/metrics"},
	} {
		resp, err := http.Get("http://" + *addr + q.path)
		if err != nil {
			fmt.Println("fleet profile:", err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		name := filepath.Join(*fleetProfile, fmt.Sprintf("idle-%d-%s.pprof", n, q.name))
		if strings.HasSuffix(q.name, "text") || q.name == "metrics" {
			name = strings.TrimSuffix(name, ".pprof") + ".txt"
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			fmt.Println("fleet profile:", err)
		}
	}
}

func fleetLine(r fleetRun) string {
	if r.Err != "" && r.Connected == 0 {
		return fmt.Sprintf("fleet %5d %-9s FAILED: %s", r.Devices, r.System, r.Err)
	}
	return fmt.Sprintf("fleet %5d %-9s connected %d held %d (%.0f/s)  produce p50/p99/p99.9 %s/%s/%s  commands %d/%d p50/p99 %s/%s  CPU %.3f s/1k  datagrams %.2f/rec (%d dropped)  busy %.0f/min  GC %.1f/min (%.1f ms)  RSS %.0f MB idle (%.1f KB/conn), peak %.0f  errors %d  load %.1f",
		r.Devices, r.System, r.Connected, r.Held, r.SetupPerSec, us(r.P50us), us(r.P99us), us(r.P999us),
		r.CmdDelivered, r.Commands, us(r.CmdP50us), us(r.CmdP99us), r.CPUPer1000,
		r.DatagramsPerRec, r.RcvbufDrops, r.BusyPerMinute, r.GCPerMinute, r.GCPauseMs, r.IdleRSSMB, r.RSSPerConnKB, r.PeakRSSMB, r.Errors, r.LoadAvg)
}

func us(v int64) string {
	return (time.Duration(v) * time.Microsecond).Round(10 * time.Microsecond).String()
}

// writeFleet writes fleet.json and fleet.md.
func writeFleet(out string, p fleetload.Params, runs []fleetRun) error {
	b, err := json.MarshalIndent(struct {
		Params fleetload.Params `json:"params"`
		Runs   []fleetRun       `json:"runs"`
	}{p, runs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "fleet.json"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "fleet.md"), []byte(fleetMarkdown(p, runs)), 0o644)
}
