package report

import (
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// asyncSizes are the async-produce cells of the throughput charts.
var asyncSizes = []struct {
	workload string
	label    string
}{
	{"async-128", "128 B"}, {"async-1k", "1 KiB"}, {"async-16k", "16 KiB"}, {"async-64k", "64 KiB"},
}

// WriteCharts draws the charts into dir as SVG and PNG and returns the
// SVG paths.
func (r *Report) WriteCharts(dir string) ([]string, error) {
	var out []string
	for _, net := range []string{"loopback", "wan"} {
		for _, tier := range []string{"T0", "T1"} {
			for _, metric := range []string{"MB/s", "msgs/s"} {
				name := fmt.Sprintf("throughput-%s-%s-%s", net, tier, map[string]string{"MB/s": "mbps", "msgs/s": "msgps"}[metric])
				ok, err := r.throughputChart(filepath.Join(dir, name), net, tier, metric)
				if err != nil {
					return out, err
				}
				if ok {
					out = append(out, filepath.Join(dir, name+".svg"))
				}
			}
		}
		for _, c := range r.cellsOn(net) {
			if !c.Latency {
				continue
			}
			name := fmt.Sprintf("latency-%s-%s-%s", net, c.Tier, c.Workload)
			ok, err := r.latencyChart(filepath.Join(dir, name), c)
			if err != nil {
				return out, err
			}
			if ok {
				out = append(out, filepath.Join(dir, name+".svg"))
			}
		}
	}
	return out, nil
}

func (r *Report) throughputChart(base, net, tier, metric string) (bool, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Async produce throughput by message size — %s, %s", tier, net)
	p.X.Label.Text = "message size"
	p.Y.Label.Text = metric
	if metric == "msgs/s" {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	var ticks []plot.Tick
	for i, s := range asyncSizes {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: s.label})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = -0.3, float64(len(asyncSizes)-1)+0.3
	// msgs/s falls with the size and MB/s rises: the legend goes in the
	// corner the lines leave free.
	p.Legend.Left = true
	p.Legend.Top = metric == "MB/s"
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(4)
	if p.Legend.Top {
		p.Legend.YOffs = -vg.Points(4)
	}
	any := false
	for si, sys := range r.systems() {
		var xys plotter.XYs
		for i, s := range asyncSizes {
			c := r.Find(net, tier+"/"+s.workload)
			if c == nil {
				continue
			}
			sm, ok := c.Summary[sys]
			if !ok || sm.N == 0 {
				continue
			}
			v := sm.MBPerSec
			if metric == "msgs/s" {
				v = sm.MsgsPerSec
			}
			if v <= 0 || math.IsNaN(v) {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(i), Y: v})
		}
		if len(xys) == 0 {
			continue
		}
		any = true
		if err := addLine(p, si, systemTitle(sys), xys); err != nil {
			return false, err
		}
	}
	if !any {
		return false, nil
	}
	if metric == "MB/s" {
		p.Y.Min = 0
	}
	return true, save(p, base)
}

func (r *Report) latencyChart(base string, c *Cell) (bool, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Latency percentiles — %s", cellTitle(c))
	if c.Net == "wan" {
		p.Title.Text += " (WAN)"
	}
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "p50"}, {Value: 1, Label: "p99"}, {Value: 2, Label: "p99.9"}})
	p.X.Min, p.X.Max = -0.3, 2.3
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(4)
	any := false
	for si, sys := range r.systems() {
		sm, ok := c.Summary[sys]
		if !ok || sm.N == 0 || sm.P50us <= 0 {
			continue
		}
		xys := plotter.XYs{{X: 0, Y: sm.P50us}, {X: 1, Y: math.Max(sm.P99us, 1)}, {X: 2, Y: math.Max(sm.P999us, 1)}}
		any = true
		if err := addLine(p, si, systemTitle(sys), xys); err != nil {
			return false, err
		}
	}
	if !any {
		return false, nil
	}
	return true, save(p, base)
}

func addLine(p *plot.Plot, i int, name string, xys plotter.XYs) error {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i)
	l.Width = vg.Points(1.5)
	pts.Color = plotutil.Color(i)
	pts.Shape = plotutil.Shape(i)
	p.Add(l, pts)
	p.Legend.Add(name, l, pts)
	return nil
}

func save(p *plot.Plot, base string) error {
	p.Add(plotter.NewGrid())
	for _, ext := range []string{".svg", ".png"} {
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, base+ext); err != nil {
			return err
		}
	}
	return nil
}

// logTicks marks 1, 2 and 5 times each power of ten in range, labelled
// compactly (2k, 50k, 1M), so a log axis within one decade still has
// labels.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 {
		lo = 1
	}
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi*10; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < lo/1.0001 || v > hi*1.0001 {
				continue
			}
			out = append(out, plot.Tick{Value: v, Label: compact(v)})
		}
	}
	if len(out) < 2 {
		out = append(out, plot.Tick{Value: lo, Label: compact(lo)}, plot.Tick{Value: hi, Label: compact(hi)})
	}
	return out
}

func compact(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(v/1e6) + "M"
	case v >= 1e3:
		return trimZero(v/1e3) + "k"
	}
	return trimZero(v)
}

func trimZero(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
