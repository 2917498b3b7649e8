package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ledgemq/ledge/bench/internal/server"
	"github.com/ledgemq/ledge/bench/internal/wan"
)

// shape is what a workload does.
type shape int

const (
	async    shape = iota // one or more producers, window in flight each
	oneByOne              // one message at a time
	openLoop              // fixed rate, latency from the schedule
	replay                // fill, restart, read from the start
)

// workload is one row of the comparison, before a tier is chosen.
type workload struct {
	name       string
	shape      shape
	size       int
	producers  int
	partitions int
	shared     bool // producers share one connection
	// sustained: the measured phase moves settings.sustainedBytes per
	// producer instead of lasting settings.duration.
	sustained bool
	latency   bool // latency is the point
	onlyT0    bool
	// tags, for a replay: the messages name one of tags tags in turn, and
	// the replay keeps one of them (a filter on the server).
	tags int
}

// workloads is every workload, in report order.
var workloads = []workload{
	{name: "async-128", shape: async, size: 128, producers: 1, partitions: 1},
	{name: "async-1k", shape: async, size: 1 << 10, producers: 1, partitions: 1},
	{name: "async-16k", shape: async, size: 16 << 10, producers: 1, partitions: 1},
	{name: "async-64k", shape: async, size: 64 << 10, producers: 1, partitions: 1},
	{name: "async-256k", shape: async, size: 256 << 10, producers: 1, partitions: 1},
	{name: "async-1m", shape: async, size: 1 << 20, producers: 1, partitions: 1},
	{name: "sync-1k", shape: oneByOne, size: 1 << 10, producers: 1, partitions: 1, latency: true},
	{name: "multi4-1k", shape: async, size: 1 << 10, producers: 4, partitions: 4},
	{name: "multi4s-1k", shape: async, size: 1 << 10, producers: 4, partitions: 4, shared: true},
	{name: "openloop-1k", shape: openLoop, size: 1 << 10, producers: 1, partitions: 1, latency: true},
	{name: "replay-1k", shape: replay, size: 1 << 10, producers: 1, partitions: 1, onlyT0: true},
	{name: "replay-64k", shape: replay, size: 64 << 10, producers: 1, partitions: 1, onlyT0: true},
	{name: "filter-1k", shape: replay, size: 1 << 10, producers: 1, partitions: 1, onlyT0: true, tags: FilterTags},
}

// FilterTags is how many tags the filtered replay's messages name: it
// keeps one, so the server reads every message and sends one in
// FilterTags.
const FilterTags = 10

// windowBytes bounds a producer's window in bytes: a window of
// settings.window messages, but never more than windowBytes of payload
// (500 × 64 KiB), so that neither client holds half a gigabyte of 1 MiB
// messages and both get the same bytes in flight.
const windowBytes = 32 << 20

// window is the in-flight window, in messages, of a producer of w when
// the run's window is base.
func (w workload) window(base int) int {
	return max(1, min(base, windowBytes/w.size))
}

// sustainedWorkloads are what a sustained run runs unless told
// otherwise: the producing cells the targets name.
var sustainedWorkloads = []string{"async-1k", "async-16k", "async-64k", "async-1m"}

// wanWorkloads run on the WAN-like link.
var wanWorkloads = []string{"async-1k", "sync-1k", "multi4-1k", "multi4s-1k"}

func workloadNames() []string {
	var n []string
	for _, w := range workloads {
		n = append(n, w.name)
	}
	return n
}

// cellSpec is one workload at one tier on one network.
type cellSpec struct {
	workload
	tier server.Tier
	net  string
	rate float64
}

func (c cellSpec) id() string { return string(c.tier) + "/" + c.name }

// runs reports whether system sys runs in the cell. The Kafka column
// (franz-go through the node's Kafka listener) runs the producing
// workloads, not the replays; in a quick run only async-1k, which keeps
// the smoke run short.
func (c cellSpec) runs(sys server.Kind, quick bool) bool {
	if sys != server.Kafka {
		return true
	}
	if quick {
		return c.name == "async-1k"
	}
	return c.shape != replay
}

// selectWorkloads parses a comma-separated list ("all" for every one).
func selectWorkloads(list string) ([]workload, error) {
	if list == "" || list == "all" {
		return workloads, nil
	}
	var out []workload
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(workloads, func(w workload) bool { return w.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown workload %q (have %s)", name, strings.Join(workloadNames(), ", "))
		}
		out = append(out, workloads[i])
	}
	return out, nil
}

// sustain marks the async workloads of ws sustained and drops the
// others: a sustained run measures producers that never stop.
func sustain(ws []workload) []workload {
	var out []workload
	for _, w := range ws {
		if w.shape == async {
			w.sustained = true
			out = append(out, w)
		}
	}
	return out
}

// order is the order the systems run in, in pair pair of the cell at
// index ci. Normally it rotates with the pair and the cell, so that no
// system always goes first. With both set, pairs come in twos, the second
// the reverse of the first: every system runs both before and after each
// other one, the way a sustained run must, since what one leaves behind
// (dirty pages to write back, a page cache to refill) slows the next.
func order(systems []server.Kind, pair, ci int, both bool) []server.Kind {
	k := len(systems)
	out := make([]server.Kind, 0, k)
	turn := pair + ci
	if both {
		turn = pair/2 + ci
	}
	for pos := range k {
		out = append(out, systems[(pos+turn)%k])
	}
	if both && pair%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// plan lays the cells out: tiers outer, workloads inner.
func plan(ws []workload, tiers []server.Tier, net string, rates map[server.Tier]float64) []cellSpec {
	var out []cellSpec
	for _, t := range tiers {
		for _, w := range ws {
			if w.onlyT0 && t != server.T0 {
				continue
			}
			c := cellSpec{workload: w, tier: t, net: net}
			if w.shape == openLoop {
				c.rate = rates[t]
			}
			out = append(out, c)
		}
	}
	return out
}

// settings are the run's pinned parameters.
type settings struct {
	quick       bool
	pairs       int
	window      int
	warmup      time.Duration
	duration    time.Duration
	replayBytes int64
	// sustainedBytes is the payload a sustained cell's producer moves in
	// its measured phase.
	sustainedBytes int64
	sustained      bool // async cells are sustained, pairs run in both orders
	rates          map[server.Tier]float64
	seed           uint64
	systems        []server.Kind
	tiers          []server.Tier

	ceilQUIC  time.Duration
	ceilSeq   int64
	ceilFsync time.Duration

	wan         bool
	wanRTT      time.Duration
	wanLoss     float64
	wanPairs    int
	wanDuration time.Duration
	wanWarmup   time.Duration
	wanBudget   time.Duration
	wanTCPCC    string // TCP congestion control over the WAN link ("" the system's)
}

// roundTripTimes are the unrecorded warm-up and the measured time of
// each one-at-a-time round-trip ceiling: a run's, so that its
// percentiles rest on about as many round trips as a sync-1k run's (and
// a quick run stays quick).
func (s settings) roundTripTimes() (warmup, measured time.Duration) {
	return s.warmup, s.duration
}

func defaultSettings(quick bool) settings {
	s := settings{
		quick:       quick,
		pairs:       5,
		window:      500,
		warmup:      time.Second,
		duration:    5 * time.Second,
		replayBytes: 1 << 30,
		// Gigabytes: long enough that writeback and fresh page-cache
		// pages cost what they cost a producer that never stops.
		sustainedBytes: 5 << 29,
		rates:          map[server.Tier]float64{server.T0: 20000, server.T1: 2000},
		seed:           20240917,
		systems:        []server.Kind{server.Ledge, server.Kafka, server.NATSTLS, server.NATS},
		tiers:          []server.Tier{server.T0, server.T1},
		ceilQUIC:       3 * time.Second,
		ceilSeq:        1 << 30,
		ceilFsync:      3 * time.Second,
		wanRTT:         50 * time.Millisecond,
		wanLoss:        0.01,
		wanPairs:       3,
		wanDuration:    8 * time.Second,
		wanWarmup:      2 * time.Second,
		wanBudget:      8 * time.Minute,
		wanTCPCC:       wan.DefaultTCPCongestion,
	}
	if quick {
		s.pairs = 1
		s.warmup = 150 * time.Millisecond
		s.duration = 400 * time.Millisecond
		s.replayBytes = 32 << 20
		s.sustainedBytes = 64 << 20
		s.ceilQUIC = 500 * time.Millisecond
		s.ceilSeq = 64 << 20
		s.ceilFsync = 500 * time.Millisecond
		s.wanPairs = 1
		s.wanDuration = time.Second
		s.wanWarmup = 300 * time.Millisecond
		s.wanBudget = 90 * time.Second
	}
	return s
}
