package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

type config struct {
	out                 string
	workdir             string
	local, forward, lag time.Duration
	outageAt, outageFor time.Duration
	rateShare           float64
	sample              time.Duration
	durability          string
}

func main() {
	var c config
	quick := flag.Bool("quick", false, "short phases (about 12 s); output to results/quick/")
	flag.StringVar(&c.out, "out", "results", "directory of the report, samples and charts")
	flag.StringVar(&c.workdir, "workdir", "", "data directories (default: a new directory in $TMPDIR); use a real disk")
	flag.DurationVar(&c.local, "local", 5*time.Second, "length of the produce-only phase")
	flag.DurationVar(&c.forward, "forward", 10*time.Second, "length of the produce-and-forward phase")
	flag.DurationVar(&c.lag, "lag", 32*time.Second, "length of the lag phase")
	flag.DurationVar(&c.outageAt, "outage-at", 8*time.Second, "when Kafka becomes unreachable in the lag phase")
	flag.DurationVar(&c.outageFor, "outage-for", 10*time.Second, "how long Kafka stays unreachable")
	flag.Float64Var(&c.rateShare, "rate-share", 0.5, "produce rate of the lag phase, as a share of the forwarding throughput of phase 2")
	flag.DurationVar(&c.sample, "sample", 100*time.Millisecond, "lag sampling period")
	flag.StringVar(&c.durability, "durability", "interval", "topic durability: always, interval or none")
	renderFile := flag.String("render", "", "rewrite the report and charts from this uplink-lag.json into --out, without running")
	flag.Parse()
	if *renderFile != "" {
		if err := render(*renderFile, c.out); err != nil {
			fmt.Fprintln(os.Stderr, "uplinklag:", err)
			os.Exit(1)
		}
		return
	}
	if *quick {
		c.local, c.forward, c.lag, c.outageAt, c.outageFor = time.Second, 2*time.Second, 8*time.Second, 2*time.Second, 3*time.Second
		if c.out == "results" {
			c.out = filepath.Join("results", "quick")
		}
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "uplinklag:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if c.workdir == "" {
		d, err := os.MkdirTemp("", "uplinklag-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		c.workdir = d
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	b, err := newBench(c)
	if err != nil {
		return err
	}
	defer b.close()
	res := result{Config: c.describe(), Machine: machine(), Started: time.Now().UTC()}

	fmt.Printf("phase 1: local produce alone for %s\n", c.local)
	if res.Local, err = b.local(c.local); err != nil {
		return err
	}
	fmt.Printf("  %.0f records/s, %.1f MB/s\n", res.Local.ProduceRecords, res.Local.ProduceMB)

	fmt.Printf("phase 2: produce and forward at once for %s\n", c.forward)
	if res.Forward, err = b.forward(c.forward); err != nil {
		return err
	}
	fmt.Printf("  produce %.0f records/s, forward %.0f records/s (%.1f MB/s), drained in %s\n",
		res.Forward.ProduceRecords, res.Forward.ForwardRecords, res.Forward.ForwardMB, res.Forward.Drain)

	rate := c.rateShare * res.Forward.ForwardRecords
	fmt.Printf("phase 3: %.0f records/s for %s, Kafka unreachable from %s for %s\n", rate, c.lag, c.outageAt, c.outageFor)
	if res.Lag, err = b.lagOverTime(rate, c.lag, c.outageAt, c.outageFor, c.sample); err != nil {
		return err
	}
	fmt.Printf("  max lag %d records, %.1f s; caught up %.1f s after Kafka came back\n",
		res.Lag.MaxRecords, res.Lag.MaxAgeSeconds, res.Lag.RecoverySeconds)
	return res.write(c.out)
}

func (c config) describe() map[string]string {
	return map[string]string{
		"local":      c.local.String(),
		"forward":    c.forward.String(),
		"lag":        c.lag.String(),
		"outage_at":  c.outageAt.String(),
		"outage_for": c.outageFor.String(),
		"rate_share": fmt.Sprint(c.rateShare),
		"sample":     c.sample.String(),
		"durability": c.durability,
	}
}
