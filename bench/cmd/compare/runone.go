package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/ledgemq/ledge/bench/internal/kafkaclient"
	"github.com/ledgemq/ledge/bench/internal/ledgeclient"
	"github.com/ledgemq/ledge/bench/internal/loadgen"
	"github.com/ledgemq/ledge/bench/internal/natsclient"
	"github.com/ledgemq/ledge/bench/internal/report"
	"github.com/ledgemq/ledge/bench/internal/server"
	"github.com/ledgemq/ledge/bench/internal/sysstat"
)

// netSpec is where the servers listen.
type netSpec struct {
	name  string // loopback or wan
	host  string
	netns string
}

// harness runs cells and remembers the servers it started, so that an
// interrupted run stops them all.
type harness struct {
	s       settings
	bins    server.Binaries
	layout  sysstat.Layout
	workDir string
	logDir  string
	keep    bool
	out     io.Writer
	// profileDir receives a CPU profile of the Ledge node per run.
	profileDir string
	// loadProfileDir receives a CPU profile of this process per run,
	// over the measured phase only.
	loadProfileDir string

	mu   sync.Mutex
	live map[*server.Proc]bool
	runs int
}

func (h *harness) start(ctx context.Context, spec server.Spec) (*server.Proc, error) {
	p, err := server.Start(ctx, h.bins, spec)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.live[p] = true
	h.mu.Unlock()
	return p, nil
}

func (h *harness) stop(p *server.Proc) error {
	if p == nil {
		return nil
	}
	err := p.Stop(30 * time.Second)
	h.mu.Lock()
	delete(h.live, p)
	h.mu.Unlock()
	return err
}

// killAll ends every server still running.
func (h *harness) killAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.live {
		p.Kill()
		delete(h.live, p)
	}
}

func (h *harness) dial(ctx context.Context, p *server.Proc) (loadgen.Driver, error) {
	t := loadgen.Target{Kind: string(p.Spec.Kind), Addr: p.Addr}
	if p.Spec.Netns != "" {
		t.TCPCongestion = h.s.wanTCPCC // a server across the WAN link
	}
	switch p.Spec.Kind {
	case server.Ledge:
		t.DataDir = filepath.Join(p.Spec.DataDir, "ledge-data")
		t.FilterPlugin = h.bins.FilterPlugin
		return ledgeclient.Dial(ctx, t)
	case server.Kafka:
		t.DataDir = filepath.Join(p.Spec.DataDir, "ledge-data")
		t.KafkaAddr = p.KafkaAddr
		return kafkaclient.Dial(ctx, t)
	case server.NATSTLS:
		t.CAFile = p.CAFile
	}
	return natsclient.Dial(ctx, t)
}

// runCell measures system sys in cell cs once.
func (h *harness) runCell(ctx context.Context, ns netSpec, cs cellSpec, sys server.Kind, pair, pos int) report.Run {
	run := report.Run{System: string(sys), Pair: pair, Position: pos, LoadAvg: sysstat.LoadAverage()}
	h.mu.Lock()
	h.runs++
	dir := filepath.Join(h.workDir, fmt.Sprintf("run-%04d-%s", h.runs, sys))
	h.mu.Unlock()
	if !h.keep {
		defer os.RemoveAll(dir)
	}
	warmup, duration := h.s.warmup, h.s.duration
	if ns.name == "wan" {
		warmup, duration = h.s.wanWarmup, h.s.wanDuration
	}
	timeout := warmup + duration + 2*time.Minute
	if cs.shape == replay || cs.sustained {
		timeout = 20 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	fail := func(err error) report.Run {
		run.Err = err.Error()
		return run
	}
	spec := server.Spec{Kind: sys, Tier: cs.tier, DataDir: dir, Host: ns.host, Netns: ns.netns,
		Procs: h.layout.ServerProcs(), LogDir: h.logDir}
	if h.layout.Pinned {
		spec.CPUs = h.layout.Server
	}
	if h.profileDir != "" && (sys == server.Ledge || sys == server.Kafka) {
		name := fmt.Sprintf("%s-%s-pair%d.pprof", ns.name, strings.ReplaceAll(cs.id(), "/", "-"), pair)
		if sys == server.Kafka {
			name = "kafka-" + name
		}
		spec.Profile, _ = filepath.Abs(filepath.Join(h.profileDir, name))
	}
	proc, err := h.start(ctx, spec)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = h.stop(proc) }()
	drv, err := h.dial(ctx, proc)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = drv.Close() }()
	dur := loadgen.PageCache
	if cs.tier == server.T1 {
		dur = loadgen.Fsync
	}
	if kd, ok := drv.(*kafkaclient.Driver); ok {
		kd.RecordSize = cs.size // its batches hold as many records as the SDK's
	}
	if err := drv.Prepare(ctx, cs.partitions, dur); err != nil {
		return fail(err)
	}

	var s0, s1 sysstat.Sample
	var sampleErr error
	var stopProfile func()
	hooks := loadgen.Hooks{
		Begin: func() {
			s0, sampleErr = proc.Sample()
			stopProfile = h.profileLoad(ns, cs, sys, pair)
		},
		End: func() {
			var err error
			if s1, err = proc.Sample(); err != nil && sampleErr == nil {
				sampleErr = err
			}
			stopProfile()
		},
	}
	window := cs.window(h.s.window)
	params := loadgen.Params{Size: cs.size, Window: window, Warmup: warmup, Duration: duration, Rate: cs.rate, Seed: h.s.seed, Tags: cs.tags}
	if cs.sustained {
		params.Count = max(1, h.s.sustainedBytes/int64(cs.size))
	}

	var res loadgen.Result
	var runErr error
	switch cs.shape {
	case async:
		var prods []loadgen.Producer
		if cs.shared {
			prods, err = drv.SharedProducers(ctx, cs.producers, window)
		} else {
			for i := range cs.producers {
				var p loadgen.Producer
				if p, err = drv.Producer(ctx, i, window); err != nil {
					break
				}
				prods = append(prods, p)
			}
		}
		if err == nil {
			res, runErr = loadgen.RunAsync(ctx, prods, params, hooks)
		}
		for _, p := range prods {
			_ = p.Close()
		}
	case oneByOne, openLoop:
		var p loadgen.Producer
		if p, err = drv.Producer(ctx, 0, window); err == nil {
			if cs.shape == oneByOne {
				res, runErr = loadgen.RunSync(ctx, p, params, hooks)
			} else {
				res, runErr = loadgen.RunOpenLoop(ctx, p, params, hooks)
			}
			_ = p.Close()
		}
	case replay:
		res, runErr, err = h.replay(ctx, &proc, &drv, spec, params, hooks, &run)
	}
	if err != nil {
		return fail(err)
	}
	if !proc.Alive() {
		return fail(fmt.Errorf("server exited during the run: %s", proc.LogTail()))
	}

	run.Msgs, run.Bytes = res.Msgs, res.Bytes
	run.ElapsedSec = res.Elapsed.Seconds()
	if res.Elapsed > 0 {
		run.MsgsPerSec, run.MBPerSec = res.MsgsPerSec(), res.MBPerSec()
	}
	run.P50us, run.P99us, run.P999us = res.Percentile(50), res.Percentile(99), res.Percentile(99.9)
	run.Errors = res.Errors
	if sampleErr == nil && res.Bytes > 0 {
		d := s1.Sub(s0)
		run.CPUSec = d.CPU.Seconds()
		run.CPUSecGB = d.CPU.Seconds() / (float64(res.Bytes) / 1e9)
		run.DiskPerB = float64(d.WriteBytes) / float64(res.Bytes)
		run.PeakRSSMB = float64(d.PeakRSS) / 1e6
	}
	if runErr != nil {
		run.Err = runErr.Error()
	} else if sampleErr != nil {
		run.Err = "sampling the server: " + sampleErr.Error()
	}
	return run
}

// replay fills the log untimed, restarts the server on it (so neither
// server answers from memory it filled while writing), and reads it all
// from the start. With tagged messages (params.Tags) the reader keeps
// the first tag only: the server reads the whole log and sends one
// message in params.Tags.
func (h *harness) replay(ctx context.Context, proc **server.Proc, drv *loadgen.Driver, spec server.Spec,
	params loadgen.Params, hooks loadgen.Hooks, run *report.Run) (res loadgen.Result, runErr, err error) {
	count := h.s.replayBytes / int64(params.Size)
	p, err := (*drv).Producer(ctx, 0, params.Window)
	if err != nil {
		return res, nil, err
	}
	fill := params
	fill.Warmup, fill.Count = 0, count
	fres, ferr := loadgen.RunAsync(ctx, []loadgen.Producer{p}, fill, loadgen.Hooks{})
	_ = p.Close()
	if ferr != nil {
		return res, nil, fmt.Errorf("filling the log: %w", ferr)
	}
	if fres.Msgs != count {
		return res, nil, fmt.Errorf("filling the log: %d of %d messages acknowledged", fres.Msgs, count)
	}
	_ = (*drv).Close()
	*drv = nopDriver{}
	if err := h.stop(*proc); err != nil {
		return res, nil, fmt.Errorf("stopping the filled server: %w", err)
	}
	t := time.Now()
	np, err := h.start(ctx, spec)
	if err != nil {
		return res, nil, fmt.Errorf("restarting on the filled log: %w", err)
	}
	*proc = np
	run.RestartSec = time.Since(t).Seconds()
	d, err := h.dial(ctx, np)
	if err != nil {
		return res, nil, err
	}
	*drv = d
	keep, want := "", count
	if params.Tags > 0 {
		keep, want = loadgen.TagName(0), loadgen.TaggedCount(count, params.Tags, 0)
	}
	r, err := d.Reader(ctx, 0, keep)
	if err != nil {
		return res, nil, err
	}
	defer r.Close()
	res, runErr = loadgen.RunReplay(ctx, r, want, hooks)
	return res, runErr, nil
}

// nopDriver stands in for a closed driver.
type nopDriver struct{ loadgen.Driver }

func (nopDriver) Close() error { return nil }

// profileLoad starts a CPU profile of this process for one measured
// phase, when asked to, and returns what stops it.
func (h *harness) profileLoad(ns netSpec, cs cellSpec, sys server.Kind, pair int) func() {
	if h.loadProfileDir == "" {
		return func() {}
	}
	name := fmt.Sprintf("loadgen-%s-%s-%s-pair%d.pprof", ns.name, strings.ReplaceAll(cs.id(), "/", "-"), sys, pair)
	f, err := os.Create(filepath.Join(h.loadProfileDir, name))
	if err != nil {
		fmt.Fprintln(h.out, "profile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		fmt.Fprintln(h.out, "profile:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
