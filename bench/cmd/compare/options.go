package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ledgemq/ledge/bench/internal/server"
	"github.com/ledgemq/ledge/bench/internal/wan"
)

// options are the command line's flags.
type options struct {
	quick, useWAN, pin, keep, loopback, sustained                       bool
	sustainedBytes                                                      int64
	pairs                                                               int
	out, wls, tiers, systems, workDir                                   string
	duration, warmup                                                    time.Duration
	replayBytes                                                         int64
	ledgeBin, natsdBin, profileDir, ledgeprofBin, loadProfile, wanTCPCC string
	render                                                              string
}

func parseFlags() options {
	var o options
	flag.BoolVar(&o.quick, "quick", false, "smoke run of about a minute: one pair, short runs, small replay (proves the harness; too short to judge speed)")
	flag.IntVar(&o.pairs, "pairs", 0, "interleaved pairs per cell (default 5, quick 1)")
	flag.StringVar(&o.out, "out", "", "results directory (default results/, quick: results/quick/)")
	flag.StringVar(&o.wls, "workloads", "all", "comma-separated workloads: "+strings.Join(workloadNames(), ",")+" (all of them), or "+FleetWorkload)
	flag.StringVar(&o.tiers, "tiers", "T0,T1", "durability tiers to run: T0 (page cache), T1 (fsync)")
	flag.StringVar(&o.systems, "systems", "ledge,kafka,nats-tls,nats", "systems to run; ledge must be one of them for ratios (kafka: franz-go through the node's Kafka listener, on the producing workloads; quick: async-1k only)")
	flag.BoolVar(&o.sustained, "sustained", false, "sustained mode: each async run moves --sustained-bytes (gigabytes, not seconds, so writeback and new page-cache pages count), pairs come in twos running the systems in both orders; only async workloads (default "+strings.Join(sustainedWorkloads, ",")+")")
	flag.Int64Var(&o.sustainedBytes, "sustained-bytes", 0, "with --sustained: payload bytes per producer per run (default 2.5 GiB, quick 64 MiB)")
	flag.BoolVar(&o.useWAN, "wan", false, "also run a bounded WAN-like comparison (network namespace, 50 ms RTT, 1% loss); skipped with a message where unavailable")
	flag.BoolVar(&o.pin, "pin", true, "pin the servers and the load generator to separate CPUs where the machine allows")
	flag.StringVar(&o.workDir, "workdir", "", "where data directories go (default a new directory under $TMPDIR); must be on a real disk for T1 to mean anything")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directories")
	flag.DurationVar(&o.duration, "duration", 0, "measured time per run (default 5s, quick 400ms)")
	flag.DurationVar(&o.warmup, "warmup", 0, "unrecorded warm-up per run (default 1s, quick 150ms)")
	flag.Int64Var(&o.replayBytes, "replay-bytes", 0, "bytes to replay (default 1 GiB, quick 32 MiB)")
	flag.StringVar(&o.ledgeBin, "ledge-bin", "", "use this ledge binary instead of building ../cmd/ledge")
	flag.StringVar(&o.natsdBin, "natsd-bin", "", "use this natsd binary instead of building ./cmd/natsd")
	flag.StringVar(&o.profileDir, "profile-ledge", "", "write a CPU profile of the Ledge node per run into this directory (ledge serve --cpuprofile)")
	flag.StringVar(&o.ledgeprofBin, "ledgeprof-bin", "", "with --profile-ledge: run the node under this bench/cmd/ledgeprof binary (for a --ledge-bin older than serve --cpuprofile)")
	flag.StringVar(&o.loadProfile, "profile-loadgen", "", "write a CPU profile of the load generator (the SDK or nats.go client side) per run, over its measured phase, into this directory")
	flag.StringVar(&o.wanTCPCC, "wan-tcp-cc", wan.DefaultTCPCongestion, "TCP congestion control over the WAN link, at both ends (quic-go implements only Cubic; \"system\" keeps the kernel's default, which may be BBR)")
	flag.BoolVar(&o.loopback, "loopback", true, "run the loopback comparison (--loopback=false --wan runs the WAN-like part alone)")
	flag.StringVar(&o.render, "render", "", "only rewrite the markdown and charts of --out from this results.json (no run)")
	flag.Parse()
	if o.out == "" {
		o.out = "results"
		if o.quick {
			o.out = filepath.Join("results", "quick")
		}
	}
	return o
}

// settings are the defaults of the mode (full or quick) with the flags
// that override them, the workloads selected, and whether the fleet is
// one of them.
func (o options) settings() (settings, []workload, bool, error) {
	s := defaultSettings(o.quick)
	if o.pairs > 0 {
		s.pairs = o.pairs
	}
	if o.duration > 0 {
		s.duration = o.duration
	}
	if o.warmup > 0 {
		s.warmup = o.warmup
	}
	if o.replayBytes > 0 {
		s.replayBytes = o.replayBytes
	}
	if o.sustainedBytes > 0 {
		s.sustainedBytes = o.sustainedBytes
	}
	s.sustained = o.sustained
	if s.sustained && o.pairs == 0 {
		s.pairs = 2 // both orders, once each
	}
	s.wan = o.useWAN
	s.wanTCPCC = o.wanTCPCC
	if s.wanTCPCC == "system" {
		s.wanTCPCC = ""
	}
	wlList, withFleet := splitFleet(o.wls)
	if s.sustained && (wlList == "" || wlList == "all") {
		wlList = strings.Join(sustainedWorkloads, ",")
	}
	var ws []workload
	var err error
	if wlList != "none" {
		if ws, err = selectWorkloads(wlList); err != nil {
			return s, nil, false, err
		}
	}
	if s.sustained {
		if ws = sustain(ws); len(ws) == 0 && !withFleet {
			return s, nil, false, errors.New("--sustained runs async workloads only, and none is selected")
		}
	}
	if s.tiers, err = parseTiers(o.tiers); err != nil {
		return s, nil, false, err
	}
	if s.systems, err = parseSystems(o.systems); err != nil {
		return s, nil, false, err
	}
	return s, ws, withFleet, nil
}

// profileDirs makes the directories the profiles go to, and finds the
// profiling wrapper when one is given.
func (o options) profileDirs(bins *server.Binaries) error {
	if o.loadProfile != "" {
		if err := os.MkdirAll(o.loadProfile, 0o755); err != nil {
			return err
		}
	}
	if o.profileDir == "" {
		return nil
	}
	// ledge serve --cpuprofile profiles the node; ledgeprof only for a
	// ledge binary older than that flag.
	if o.ledgeprofBin != "" {
		var err error
		if bins.LedgeProf, err = filepath.Abs(o.ledgeprofBin); err != nil {
			return err
		}
	}
	return os.MkdirAll(o.profileDir, 0o755)
}

func parseTiers(list string) ([]server.Tier, error) {
	var out []server.Tier
	for _, t := range strings.Split(list, ",") {
		switch strings.ToUpper(strings.TrimSpace(t)) {
		case "T0":
			out = append(out, server.T0)
		case "T1":
			out = append(out, server.T1)
		default:
			return nil, fmt.Errorf("unknown tier %q (T0 or T1)", t)
		}
	}
	return out, nil
}

func parseSystems(list string) ([]server.Kind, error) {
	var out []server.Kind
	for _, s := range strings.Split(list, ",") {
		k := server.Kind(strings.TrimSpace(s))
		switch k {
		case server.Ledge, server.Kafka, server.NATS, server.NATSTLS:
			out = append(out, k)
		default:
			return nil, fmt.Errorf("unknown system %q (ledge, kafka, nats-tls, nats)", s)
		}
	}
	return out, nil
}
