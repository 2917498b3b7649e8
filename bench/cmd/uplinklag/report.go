package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// result is one run: what was measured and on what.
type result struct {
	Started time.Time         `json:"started"`
	Config  map[string]string `json:"config"`
	Machine map[string]string `json:"machine"`
	Local   throughput        `json:"local"`
	Forward throughput        `json:"forward"`
	Lag     lagRun            `json:"lag"`
}

// machine describes where the run ran.
func machine() map[string]string {
	m := map[string]string{
		"go":         runtime.Version(),
		"platform":   runtime.GOOS + "/" + runtime.GOARCH,
		"cpus":       fmt.Sprint(runtime.NumCPU()),
		"gomaxprocs": fmt.Sprint(runtime.GOMAXPROCS(0)),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// write stores the samples (JSON), the report (markdown) and the charts.
func (r result) write(dir string) error {
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "uplink-lag.json"), j, 0o644); err != nil {
		return err
	}
	if err := r.chart(filepath.Join(dir, "uplink-lag-records"), "records not yet forwarded", func(s sample) float64 { return float64(s.LagRecords) }); err != nil {
		return err
	}
	if err := r.chart(filepath.Join(dir, "uplink-lag-age"), "age of the oldest unforwarded record (s)", func(s sample) float64 { return s.LagAge }); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "uplink-lag.md"), r.markdown(), 0o644)
}

// chart draws one lag series over the lag phase, the outage shaded.
func (r result) chart(base, ylabel string, y func(sample) float64) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Uplink lag at %.0f records/s of 1 KiB, Kafka unreachable %.0f–%.0f s", r.Lag.Rate, r.Lag.OutageFrom, r.Lag.OutageTo)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = ylabel
	var xys plotter.XYs
	top := 0.0
	for _, s := range r.Lag.Samples {
		v := y(s)
		xys = append(xys, plotter.XY{X: s.T, Y: v})
		top = max(top, v)
	}
	if top == 0 {
		top = 1
	}
	outage, err := plotter.NewPolygon(plotter.XYs{
		{X: r.Lag.OutageFrom, Y: 0}, {X: r.Lag.OutageTo, Y: 0}, {X: r.Lag.OutageTo, Y: top * 1.05}, {X: r.Lag.OutageFrom, Y: top * 1.05},
	})
	if err != nil {
		return err
	}
	outage.Color = color.RGBA{R: 0xf4, G: 0xc7, B: 0xc3, A: 0xff}
	outage.LineStyle.Width = 0
	p.Add(outage)
	p.Legend.Add("Kafka unreachable", outage)
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = color.RGBA{R: 0x2f, G: 0x5f, B: 0xb3, A: 0xff}
	l.Width = vg.Points(1.5)
	p.Add(l, plotter.NewGrid())
	p.Legend.Add("lag", l)
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Min, p.X.Max = 0, r.Lag.Seconds
	p.Y.Min = 0
	p.Y.Tick.Marker = plainTicks{}
	for _, ext := range []string{".svg", ".png"} {
		if err := p.Save(7*vg.Inch, 4*vg.Inch, base+ext); err != nil {
			return err
		}
	}
	return nil
}

func (r result) markdown() []byte {
	var b bytes.Buffer
	m := r.Machine
	f, fw, lg := r.Local, r.Forward, r.Lag
	fmt.Fprintf(&b, "# Kafka uplink: forwarding throughput and lag over time\n\n")
	fmt.Fprintf(&b, "Run %s with `cd bench && go run ./cmd/uplinklag` on %s (%s CPUs, GOMAXPROCS %s), %s, %s.\n",
		r.Started.Format(time.RFC3339), m["cpu"], m["cpus"], m["gomaxprocs"], m["platform"], m["go"])
	fmt.Fprintf(&b, "One process: the storage engine on a real disk (durability %s, append-time timestamps), a partition owner, "+
		"the uplink's transactional forwarder (`node.Forwarder` with its defaults: no linger, franz-go's "+
		"batching and compression, up to 4 MiB of Ledge records per Kafka transaction) and franz-go's in-process Kafka (`kfake`, one broker). Records are 1 KiB, produced "+
		"in batches of %d by one producer calling the owner directly (no QUIC).\n\n", r.Config["durability"], perBatch)

	fmt.Fprintf(&b, "## Throughput (same run)\n\n")
	fmt.Fprintf(&b, "| phase | seconds | produce records/s | produce MB/s | forward records/s | forward MB/s |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| 1. local produce alone (the ceiling) | %.1f | %.0f | %.1f | – | – |\n", f.Seconds, f.ProduceRecords, f.ProduceMB)
	fmt.Fprintf(&b, "| 2. produce and forward at once | %.1f | %.0f | %.1f | %.0f | %.1f |\n\n",
		fw.Seconds, fw.ProduceRecords, fw.ProduceMB, fw.ForwardRecords, fw.ForwardMB)
	fmt.Fprintf(&b, "In phase 2 the forwarder kept up with %.0f%% of the concurrent produce rate and %.0f%% of the produce-alone "+
		"ceiling; %d records were behind when produce stopped, forwarded %.2f s later (%d transactions in all).\n\n",
		100*fw.ForwardRecords/fw.ProduceRecords, 100*fw.ForwardRecords/f.ProduceRecords, fw.LagAtEnd, fw.Drain.Seconds(), fw.Transactions)
	fmt.Fprintf(&b, "Read phase 2 with the machine in mind: kfake runs in this process, so the Kafka side's work (decoding the "+
		"produce requests, storing the records, the transaction coordinator) shares the %s CPUs with the producer and the "+
		"forwarder, and the produce rate of phase 2 is what is left to the producer when all three run at full speed (this run "+
		"does not measure each one's share). Against a Kafka cluster on other machines the node would not carry kfake's share. "+
		"Phase 1's ceiling is an append to the page cache (durability %s) with nothing else running.\n\n", m["cpus"], r.Config["durability"])

	fmt.Fprintf(&b, "## Lag over time, through a Kafka outage\n\n")
	fmt.Fprintf(&b, "Produce at %.0f records/s (%s of phase 2's forwarding rate) for %.0f s; Kafka refuses every request "+
		"(connections closed) from %.0f s to %.0f s. The forwarder backs off (100 ms doubling to 1 s here; 30 s by default) "+
		"and resumes from the position committed in Kafka. Sampled every %s from `Forwarder.Status`, "+
		"the numbers `ledge_uplink_lag_records` and `ledge_uplink_lag_seconds` export.\n\n",
		lg.Rate, r.Config["rate_share"], lg.Seconds, lg.OutageFrom, lg.OutageTo, r.Config["sample"])
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| steady lag before the outage (median) | %d records, %.3f s |\n", lg.SteadyRecords, lg.SteadyAge)
	fmt.Fprintf(&b, "| peak lag | %d records, %.1f s |\n", lg.MaxRecords, lg.MaxAgeSeconds)
	if lg.RecoverySeconds >= 0 {
		fmt.Fprintf(&b, "| caught up (≤ %d records behind) after Kafka returned | %.1f s |\n", 2*perBatch, lg.RecoverySeconds)
	} else {
		fmt.Fprintf(&b, "| caught up after Kafka returned | not within the run |\n")
	}
	fmt.Fprintf(&b, "| failed attempts during the outage | %d |\n\n", lg.Failures)
	fmt.Fprintf(&b, "![lag in records](uplink-lag-records.svg)\n\n![lag age](uplink-lag-age.svg)\n\n")
	fmt.Fprintf(&b, "Once a second:\n\n| t (s) | Kafka | state | produced | forwarded | lag records | lag age (s) |\n|---|---|---|---|---|---|---|\n")
	next := 0.0
	for _, s := range lg.Samples {
		if s.T+1e-9 < next {
			continue
		}
		next = float64(int(s.T)) + 1
		k := "up"
		if s.KafkaDown {
			k = "down"
		}
		fmt.Fprintf(&b, "| %.1f | %s | %s | %d | %d | %d | %.2f |\n", s.T, k, s.State, s.Produced, s.Forwarded, s.LagRecords, s.LagAge)
	}
	fmt.Fprintf(&b, "\nRaw samples: `uplink-lag.json`. The run's configuration: ")
	keys := []string{"local", "forward", "lag", "outage_at", "outage_for", "rate_share", "sample", "durability"}
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", k, r.Config[k])
	}
	b.WriteString(".\n")
	return b.Bytes()
}

// plainTicks are the default ticks labelled without trailing zeros.
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// render rewrites the report and the charts of a run from its JSON.
func render(file, dir string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return r.write(dir)
}
