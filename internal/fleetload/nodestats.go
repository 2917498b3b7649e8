package fleetload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// UDPCounters are the machine's UDP counters (/proc/net/snmp on Linux):
// every socket of the machine, the node's and the devices' alike.
type UDPCounters struct {
	InDatagrams  uint64 // datagrams delivered to a socket
	OutDatagrams uint64 // datagrams sent
	RcvbufErrors uint64 // datagrams dropped for a full receive buffer
	SndbufErrors uint64 // datagrams dropped for a full send buffer
}

// Sub is c minus an earlier reading.
func (c UDPCounters) Sub(earlier UDPCounters) UDPCounters {
	return UDPCounters{
		InDatagrams:  c.InDatagrams - earlier.InDatagrams,
		OutDatagrams: c.OutDatagrams - earlier.OutDatagrams,
		RcvbufErrors: c.RcvbufErrors - earlier.RcvbufErrors,
		SndbufErrors: c.SndbufErrors - earlier.SndbufErrors,
	}
}

// ReadUDPCounters reads the machine's UDP counters; an error where there
// is no /proc/net/snmp.
func ReadUDPCounters() (UDPCounters, error) {
	f, err := os.Open("/proc/net/snmp")
	if err != nil {
		return UDPCounters{}, err
	}
	defer f.Close()
	return parseSNMP(f)
}

// parseSNMP reads the Udp lines of /proc/net/snmp: a line of names, then
// one of values.
func parseSNMP(r io.Reader) (UDPCounters, error) {
	sc := bufio.NewScanner(r)
	var names []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		if len(f)-1 != len(names) {
			return UDPCounters{}, fmt.Errorf("/proc/net/snmp: %d Udp values for %d names", len(f)-1, len(names))
		}
		var c UDPCounters
		fields := map[string]*uint64{"InDatagrams": &c.InDatagrams, "OutDatagrams": &c.OutDatagrams,
			"RcvbufErrors": &c.RcvbufErrors, "SndbufErrors": &c.SndbufErrors}
		for i, name := range names {
			if p := fields[name]; p != nil {
				v, err := strconv.ParseUint(f[i+1], 10, 64)
				if err != nil {
					return UDPCounters{}, fmt.Errorf("/proc/net/snmp: Udp %s: %w", name, err)
				}
				*p = v
			}
		}
		return c, nil
	}
	if err := sc.Err(); err != nil {
		return UDPCounters{}, err
	}
	return UDPCounters{}, fmt.Errorf("/proc/net/snmp: no Udp counters")
}

// GCStats are a node's garbage collections so far: how many, and the
// total of their stop-the-world pauses (what Go's debug.ReadGCStats and
// the go_gc_duration_seconds summary of /metrics say). The concurrent
// mark phase between the pauses is not in PauseTotal.
type GCStats struct {
	Cycles     uint64
	PauseTotal time.Duration
}

// GCRate is what two GCStats readings a span apart say.
type GCRate struct {
	Cycles     uint64        // collections in the span
	PerMinute  float64       // of them, a minute
	PauseTotal time.Duration // their stop-the-world pauses, added up
}

// GCBetween is the collections from a to b, span apart.
func GCBetween(a, b GCStats, span time.Duration) GCRate {
	r := GCRate{Cycles: b.Cycles - a.Cycles, PauseTotal: b.PauseTotal - a.PauseTotal}
	if span > 0 {
		r.PerMinute = float64(r.Cycles) / span.Minutes()
	}
	return r
}

// ProcessGC reads this process's collections: those of a node running in
// it, the devices' included.
func ProcessGC() GCStats {
	var s debug.GCStats
	debug.ReadGCStats(&s)
	return GCStats{Cycles: uint64(s.NumGC), PauseTotal: s.PauseTotal}
}

// MetricsGC returns a reader of a node's collections from its metrics at
// http://httpAddr/metrics (go_gc_duration_seconds_count and _sum).
func MetricsGC(httpAddr string) func(ctx context.Context) (GCStats, error) {
	return func(ctx context.Context) (GCStats, error) {
		body, err := getMetrics(ctx, httpAddr)
		if err != nil {
			return GCStats{}, err
		}
		defer body.Close()
		return parseGC(body)
	}
}

// parseGC reads the go_gc_duration_seconds summary's count and sum from
// a metrics exposition.
func parseGC(r io.Reader) (GCStats, error) {
	var s GCStats
	var haveCount, haveSum bool
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "go_gc_duration_seconds_count":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return GCStats{}, fmt.Errorf("metrics: %s: %w", f[0], err)
			}
			s.Cycles, haveCount = uint64(v), true
		case "go_gc_duration_seconds_sum":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return GCStats{}, fmt.Errorf("metrics: %s: %w", f[0], err)
			}
			s.PauseTotal, haveSum = time.Duration(v*float64(time.Second)), true
		}
	}
	if err := sc.Err(); err != nil {
		return GCStats{}, err
	}
	if !haveCount || !haveSum {
		return GCStats{}, fmt.Errorf("metrics: no go_gc_duration_seconds")
	}
	return s, nil
}

// getMetrics is the body of http://httpAddr/metrics.
func getMetrics(ctx context.Context, httpAddr string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	return resp.Body, nil
}
