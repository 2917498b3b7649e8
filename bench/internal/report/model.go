package report

import (
	"math"
	"slices"
	"time"

	"github.com/ledgemq/ledge/bench/internal/ceiling"
)

// Run is one system's measurement in one cell of one pair.
type Run struct {
	System     string  `json:"system"`
	Pair       int     `json:"pair"`
	Position   int     `json:"position"` // 0 = ran first in its pair
	Msgs       int64   `json:"msgs"`
	Bytes      int64   `json:"payload_bytes"`
	ElapsedSec float64 `json:"elapsed_sec"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
	P50us      int64   `json:"p50_us,omitempty"`
	P99us      int64   `json:"p99_us,omitempty"`
	P999us     int64   `json:"p999_us,omitempty"`
	CPUSec     float64 `json:"server_cpu_sec"`
	CPUSecGB   float64 `json:"server_cpu_sec_per_gb"`
	DiskPerB   float64 `json:"disk_bytes_per_payload_byte"`
	PeakRSSMB  float64 `json:"server_peak_rss_mb"`
	RestartSec float64 `json:"restart_sec,omitempty"` // replay: start-up on the filled log
	LoadAvg    float64 `json:"loadavg_1m"`
	Errors     int64   `json:"errors,omitempty"`
	Err        string  `json:"error,omitempty"`
}

// OK reports whether the run produced a measurement.
func (r Run) OK() bool { return r.Err == "" && r.Msgs > 0 }

// Cell is one workload at one tier on one network: the unit the
// comparison reports.
type Cell struct {
	ID        string  `json:"id"`
	Net       string  `json:"net"` // loopback or wan
	Tier      string  `json:"tier"`
	Workload  string  `json:"workload"`
	Size      int     `json:"size"`
	Producers int     `json:"producers"`
	Rate      float64 `json:"rate,omitempty"`
	Latency   bool    `json:"latency"` // whether latency is the point of the cell
	Runs      []Run   `json:"runs"`

	Summary map[string]Summary `json:"summary"` // per system: medians of its runs
	Ratios  map[string]Ratios  `json:"ratios"`  // per other system: medians of Ledge/other within pairs
}

// Summary is the medians of one system's runs in a cell.
type Summary struct {
	N          int     `json:"n"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	CPUSecGB   float64 `json:"server_cpu_sec_per_gb"`
	DiskPerB   float64 `json:"disk_bytes_per_payload_byte"`
	PeakRSSMB  float64 `json:"server_peak_rss_mb"`
	RestartSec float64 `json:"restart_sec,omitempty"`
	Failed     int     `json:"failed,omitempty"`
	FirstErr   string  `json:"first_error,omitempty"`
}

// Ratios are medians over pairs of Ledge's figure divided by another
// system's. Throughput: higher favours Ledge; latency, CPU, disk and
// memory: lower does.
type Ratios struct {
	N          int     `json:"n"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
	P999       float64 `json:"p999"`
	CPUSecGB   float64 `json:"server_cpu_sec_per_gb"`
	DiskPerB   float64 `json:"disk_bytes_per_payload_byte"`
	PeakRSS    float64 `json:"server_peak_rss"`
}

// Reference is the system ratios are taken for.
const Reference = "ledge"

// Summarize fills Summary and Ratios from Runs.
func (c *Cell) Summarize() {
	c.Summary = map[string]Summary{}
	c.Ratios = map[string]Ratios{}
	bySystem := map[string][]Run{}
	for _, r := range c.Runs {
		bySystem[r.System] = append(bySystem[r.System], r)
	}
	for sys, runs := range bySystem {
		var s Summary
		var ok []Run
		for _, r := range runs {
			if r.OK() {
				ok = append(ok, r)
			} else {
				s.Failed++
				if s.FirstErr == "" {
					s.FirstErr = r.Err
				}
			}
		}
		s.N = len(ok)
		s.MsgsPerSec = medianOf(ok, func(r Run) float64 { return r.MsgsPerSec })
		s.MBPerSec = medianOf(ok, func(r Run) float64 { return r.MBPerSec })
		s.P50us = medianOf(ok, func(r Run) float64 { return float64(r.P50us) })
		s.P99us = medianOf(ok, func(r Run) float64 { return float64(r.P99us) })
		s.P999us = medianOf(ok, func(r Run) float64 { return float64(r.P999us) })
		s.CPUSecGB = medianOf(ok, func(r Run) float64 { return r.CPUSecGB })
		s.DiskPerB = medianOf(ok, func(r Run) float64 { return r.DiskPerB })
		s.PeakRSSMB = medianOf(ok, func(r Run) float64 { return r.PeakRSSMB })
		s.RestartSec = medianOf(ok, func(r Run) float64 { return r.RestartSec })
		c.Summary[sys] = s
	}
	for sys := range bySystem {
		if sys == Reference {
			continue
		}
		type pair struct{ ref, other Run }
		var pairs []pair
		for _, r := range bySystem[Reference] {
			for _, o := range bySystem[sys] {
				if o.Pair == r.Pair && r.OK() && o.OK() {
					pairs = append(pairs, pair{r, o})
				}
			}
		}
		ratio := func(f func(Run) float64) float64 {
			var v []float64
			for _, p := range pairs {
				if d := f(p.other); d > 0 {
					v = append(v, f(p.ref)/d)
				}
			}
			return finite(Median(v))
		}
		c.Ratios[sys] = Ratios{
			N:          len(pairs),
			MsgsPerSec: ratio(func(r Run) float64 { return r.MsgsPerSec }),
			P50:        ratio(func(r Run) float64 { return float64(r.P50us) }),
			P99:        ratio(func(r Run) float64 { return float64(r.P99us) }),
			P999:       ratio(func(r Run) float64 { return float64(r.P999us) }),
			CPUSecGB:   ratio(func(r Run) float64 { return r.CPUSecGB }),
			DiskPerB:   ratio(func(r Run) float64 { return r.DiskPerB }),
			PeakRSS:    ratio(func(r Run) float64 { return r.PeakRSSMB }),
		}
	}
}

// medianOf is the median of f over runs, 0 when there are none (JSON
// has no NaN).
func medianOf(runs []Run, f func(Run) float64) float64 {
	v := make([]float64, 0, len(runs))
	for _, r := range runs {
		v = append(v, f(r))
	}
	return finite(Median(v))
}

func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// Median returns the median of v, or NaN when v is empty.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Target is one goal of the comparison and whether this run met it.
type Target struct {
	Name   string  `json:"name"`
	Want   string  `json:"want"`
	Got    float64 `json:"got"`
	Need   float64 `json:"need"`
	Met    bool    `json:"met"`
	Known  bool    `json:"known"` // false: a figure it needs is missing
	Detail string  `json:"detail"`
}

// Env describes where and how the run happened.
type Env struct {
	CPU          string   `json:"cpu"`
	CPUs         int      `json:"cpus"`
	Kernel       string   `json:"kernel"`
	Go           string   `json:"go"`
	Commit       string   `json:"commit"`
	NATSServer   string   `json:"nats_server"`
	Layout       string   `json:"layout"`
	ServerProcs  int      `json:"server_gomaxprocs"`
	LoadProcs    int      `json:"loadgen_gomaxprocs"`
	FileSystem   string   `json:"file_system"`
	LoadAvgStart float64  `json:"loadavg_start"`
	LoadAvgEnd   float64  `json:"loadavg_end"`
	Notes        []string `json:"notes,omitempty"`
}

// Params are the pinned parameters of the run.
type Params struct {
	Quick            bool     `json:"quick"`
	Pairs            int      `json:"pairs"`
	Systems          []string `json:"systems"`
	Window           int      `json:"in_flight_window"`
	WindowBytes      int      `json:"in_flight_window_bytes,omitempty"` // the window shrinks for large messages to hold at most this
	SustainedBytes   int64    `json:"sustained_bytes,omitempty"`        // sustained mode: payload per producer per run
	WarmupSec        float64  `json:"warmup_sec"`
	DurationSec      float64  `json:"duration_sec"`
	ReplayBytes      int64    `json:"replay_bytes"`
	RateT0           float64  `json:"open_loop_rate_t0"`
	RateT1           float64  `json:"open_loop_rate_t1"`
	Seed             uint64   `json:"seed"`
	LedgeBatch       int      `json:"ledge_batch_records"`
	LedgeBatchBytes  int      `json:"ledge_batch_bytes,omitempty"`
	LedgeFlightBytes int      `json:"ledge_in_flight_bytes,omitempty"` // per partition
	LedgeLinger      string   `json:"ledge_linger"`
	LedgeIdempotent  bool     `json:"ledge_idempotent"`
	LedgePollBytes   int      `json:"ledge_poll_max_bytes"`
	NATSBatch        string   `json:"nats_batch"`
	NATSReplayPull   int      `json:"nats_replay_pull_messages"`
	Compression      string   `json:"compression"`
	FilterTags       int      `json:"filter_tags,omitempty"`
	FilterPlugin     string   `json:"filter_plugin,omitempty"`
	WANRTTms         float64  `json:"wan_rtt_ms,omitempty"`
	WANLossPct       float64  `json:"wan_loss_pct,omitempty"`
	WANDurationSec   float64  `json:"wan_duration_sec,omitempty"`
	WANPairs         int      `json:"wan_pairs,omitempty"`
	WANBudgetSeconds float64  `json:"wan_budget_sec,omitempty"`
}

// Report is everything one run of the comparison produced.
type Report struct {
	Started   time.Time     `json:"started"`
	Finished  time.Time     `json:"finished"`
	Env       Env           `json:"env"`
	Params    Params        `json:"params"`
	Ceilings  []ceiling.Set `json:"ceilings"`
	Ceiling   ceiling.Set   `json:"ceiling_median"`
	Cells     []*Cell       `json:"cells"`
	Targets   []Target      `json:"targets"`
	WAN       string        `json:"wan"` // how the WAN was built, or why it was skipped
	WANPassed bool          `json:"wan_ran"`
	WANNotes  []string      `json:"wan_notes,omitempty"`
	// WANCeilings are raw single streams over the WAN-like link, bytes/s.
	WANRawTCP  float64 `json:"wan_raw_tcp_bytes_per_sec,omitempty"`
	WANRawQUIC float64 `json:"wan_raw_quic_bytes_per_sec,omitempty"`
}

// MedianCeiling fills Ceiling with the per-field median of Ceilings.
func (r *Report) MedianCeiling() {
	m := func(f func(ceiling.Set) float64) float64 {
		v := make([]float64, 0, len(r.Ceilings))
		for _, c := range r.Ceilings {
			v = append(v, f(c))
		}
		x := Median(v)
		if math.IsNaN(x) {
			return 0
		}
		return x
	}
	r.Ceiling = ceiling.Set{
		QUICMsgsPerSec:   m(func(c ceiling.Set) float64 { return c.QUICMsgsPerSec }),
		QUICBytesPerSec:  m(func(c ceiling.Set) float64 { return c.QUICBytesPerSec }),
		SeqWriteBPS:      m(func(c ceiling.Set) float64 { return c.SeqWriteBPS }),
		SeqWriteSyncBPS:  m(func(c ceiling.Set) float64 { return c.SeqWriteSyncBPS }),
		FsyncOpsPerSec:   m(func(c ceiling.Set) float64 { return c.FsyncOpsPerSec }),
		FsyncBytesPerSec: m(func(c ceiling.Set) float64 { return c.FsyncBytesPerSec }),
		FsyncP50us:       int64(m(func(c ceiling.Set) float64 { return float64(c.FsyncP50us) })),
		FsyncP99us:       int64(m(func(c ceiling.Set) float64 { return float64(c.FsyncP99us) })),

		PlacedQUICInBytesPerSec:  m(func(c ceiling.Set) float64 { return c.PlacedQUICInBytesPerSec }),
		PlacedQUICOutBytesPerSec: m(func(c ceiling.Set) float64 { return c.PlacedQUICOutBytesPerSec }),

		PlacedQUICOwnInBytesPerSec:  m(func(c ceiling.Set) float64 { return c.PlacedQUICOwnInBytesPerSec }),
		PlacedQUICOwnOutBytesPerSec: m(func(c ceiling.Set) float64 { return c.PlacedQUICOwnOutBytesPerSec }),

		PlacedQUICRoundTrip: r.medianRoundTrip(func(c ceiling.Set) ceiling.RoundTrip { return c.PlacedQUICRoundTrip }),
		PlacedTLSRoundTrip:  r.medianRoundTrip(func(c ceiling.Set) ceiling.RoundTrip { return c.PlacedTLSRoundTrip }),
	}
}

// medianRoundTrip is the per-percentile median of the round trips of
// Ceilings that were measured (zero where none was).
func (r *Report) medianRoundTrip(get func(ceiling.Set) ceiling.RoundTrip) ceiling.RoundTrip {
	var n, p50, p99, p999 []float64
	for _, c := range r.Ceilings {
		if rt := get(c); rt.N > 0 {
			n, p50, p99, p999 = append(n, float64(rt.N)), append(p50, float64(rt.P50us)), append(p99, float64(rt.P99us)), append(p999, float64(rt.P999us))
		}
	}
	if len(n) == 0 {
		return ceiling.RoundTrip{}
	}
	return ceiling.RoundTrip{N: int64(Median(n)), P50us: int64(Median(p50)), P99us: int64(Median(p99)), P999us: int64(Median(p999))}
}

// Find returns the cell with id on net, or nil.
func (r *Report) Find(net, id string) *Cell {
	for _, c := range r.Cells {
		if c.Net == net && c.ID == id {
			return c
		}
	}
	return nil
}
