package fleetload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// SetupStats are a node's counters of connection set-up so far, from its
// /metrics: its CPU (process_cpu_seconds_total) and what became of the
// connections that dialed it.
type SetupStats struct {
	CPUSeconds  float64
	Accepted    uint64 // handshakes completed (ledge_connections_accepted_total)
	Refused     uint64 // refused before any TLS work, every reason (ledge_connections_refused_total)
	Evicted     uint64 // closed unauthenticated to make room (ledge_connections_evicted_total)
	Validations uint64 // asked to prove their address first (ledge_connections_address_validations_total)
}

// Sub is s minus an earlier reading.
func (s SetupStats) Sub(earlier SetupStats) SetupStats {
	return SetupStats{CPUSeconds: s.CPUSeconds - earlier.CPUSeconds, Accepted: s.Accepted - earlier.Accepted,
		Refused: s.Refused - earlier.Refused, Evicted: s.Evicted - earlier.Evicted,
		Validations: s.Validations - earlier.Validations}
}

// SetupCounter is a System whose node says what setting the fleet up
// cost it. Run reads it before the first dial and once every device is
// connected (or failed): handshakes completed beyond one a device, and
// connections refused or evicted, are dials made again.
type SetupCounter interface {
	// NodeSetup returns the counters so far; false when the node does
	// not say.
	NodeSetup(ctx context.Context) (s SetupStats, ok bool, err error)
}

// MetricsSetup returns a reader of a node's set-up counters from its
// metrics at http://httpAddr/metrics.
func MetricsSetup(httpAddr string) func(ctx context.Context) (SetupStats, error) {
	return func(ctx context.Context) (SetupStats, error) {
		body, err := getMetrics(ctx, httpAddr)
		if err != nil {
			return SetupStats{}, err
		}
		defer body.Close()
		return parseSetup(body)
	}
}

// parseSetup adds up the set-up counters in a metrics exposition (each
// over its labels).
func parseSetup(r io.Reader) (SetupStats, error) {
	var s SetupStats
	var haveCPU bool
	counters := map[string]*uint64{
		"ledge_connections_accepted_total":            &s.Accepted,
		"ledge_connections_refused_total":             &s.Refused,
		"ledge_connections_evicted_total":             &s.Evicted,
		"ledge_connections_address_validations_total": &s.Validations,
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		p, isCounter := counters[name]
		if !isCounter && name != "process_cpu_seconds_total" {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return SetupStats{}, fmt.Errorf("metrics: %q: %w", line, err)
		}
		if isCounter {
			*p += uint64(v)
		} else {
			s.CPUSeconds, haveCPU = v, true
		}
	}
	if err := sc.Err(); err != nil {
		return SetupStats{}, err
	}
	if !haveCPU {
		return SetupStats{}, fmt.Errorf("metrics: no process_cpu_seconds_total")
	}
	return s, nil
}
