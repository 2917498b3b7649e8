package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/sdk"
)

// BenchmarkPollBesideHostilePlugins measures an honest consumer's poll
// latency (produce one record, poll it; no plugin) on a node where, in
// every other phase, four other consumers keep a looping filter (each
// call spins to its deadline) and a memory-growing one (each call grows
// to the instance limit and fails) busy. Everything runs in this one
// process, on the node's default of one plugin worker per CPU but one.
//
// It measures two variants: GOMAXPROCS at the CPUs, as ledge serve runs
// it, and with the plugin workers' Go processors their own
// (plugins.Processors raises GOMAXPROCS by the workers; measured worse,
// plugins/RATIONALE.md). Each round runs, for
// each variant, a baseline phase and a hostile one (3 s each), the next
// round the same phases in reverse order, so that every kind of phase
// sees the same machine; a hostile phase starts once both plugins have
// failed in it, and the next phase once the node's plugin calls have
// stopped. Three rounds, about 50 s.
//
// For each variant it prints the ratio of the median over phases of the
// poll p99 beside the hostile plugins to that of the baseline (the
// target is at most 2), each phase's figures and the Go runtime's view
// of it (garbage collections, their longest stop-the-world and the time
// to stop every processor, how long runnable goroutines waited for a
// processor), and the load average: on a shared machine the noise of
// other work can be larger than the effect (-v shows every phase).
//
//	go test ./internal/e2e -run '^$' -bench PollBesideHostilePlugins -benchtime 1x -count 3
func BenchmarkPollBesideHostilePlugins(b *testing.B) {
	const (
		phase    = 3 * time.Second
		rounds   = 3
		hostiles = 4
	)
	// As ledge serve does, GOMAXPROCS stays at procs, the workers taking
	// their processors from the node's; the other variant gives them
	// processors of their own (GOMAXPROCS withWorkers).
	procs := runtime.GOMAXPROCS(0)
	var withWorkers int
	n := pluginNode(b, func(cfg *node.Config) {
		cfg.Plugins.MaxStrikes = 1 << 30 // the hostile plugins stay in use
		cfg.Plugins, withWorkers = plugins.Processors(cfg.Plugins, procs)
	})
	b.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	c := dial(b, n)
	ctx := testContext(b)
	createTopic(b, c, "honest", sdk.TopicConfig{Partitions: 1})
	createTopic(b, c, "bait", sdk.TopicConfig{Partitions: 1})
	hostile := buildPlugin(b, hostilePkg)
	for _, name := range []string{"loop", "hungry"} {
		if _, err := c.AddPlugin(ctx, name, sdk.PluginFilter, hostile); err != nil {
			b.Fatal(err)
		}
	}
	produce(b, c, "bait", &sdk.Record{Value: []byte("bait")})
	p, err := c.NewProducer(ctx, "honest")
	if err != nil {
		b.Fatal(err)
	}
	cons, err := c.NewConsumer(ctx, "honest", sdk.WithMaxWait(0), sdk.WithPrefetch(false))
	if err != nil {
		b.Fatal(err)
	}
	var bait []*sdk.Consumer
	for i := range hostiles {
		f := []struct{ name, do string }{{"loop", "spin"}, {"hungry", "alloc"}}[i%2]
		hc, err := dial(b, n).NewConsumer(ctx, "bait", sdk.WithMaxWait(0), sdk.WithPrefetch(false),
			sdk.WithStart(sdk.AtFirst()), sdk.WithFilter(f.name, map[string]string{"do": f.do}))
		if err != nil {
			b.Fatalf("hostile consumer %d: %v", i, err)
		}
		bait = append(bait, hc)
	}

	// failures counts the hostile plugins' failed calls, each plugin's.
	failures := func() (loop, hungry uint64) {
		list, err := c.ListPlugins(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, pi := range list {
			switch pi.Name {
			case "loop":
				loop = pi.Failures
			case "hungry":
				hungry = pi.Failures
			}
		}
		return loop, hungry
	}
	// measure produces and polls one record at a time for phase and
	// returns the phase's figures.
	measure := func(kind string) phaseFigures {
		rt := readRuntimeFigures()
		var lat []time.Duration
		for end := time.Now().Add(phase); time.Now().Before(end); {
			if err := p.ProduceSync(ctx, &sdk.Record{Value: []byte("honest")}); err != nil {
				b.Fatal(err)
			}
			for got := 0; got == 0; {
				start := time.Now()
				rs, err := cons.Poll(ctx)
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				got = len(rs)
			}
		}
		return newPhaseFigures(kind, lat, readRuntimeFigures().since(rt))
	}
	// hostilePhase measures while the bait consumers poll through the
	// hostile plugins, then waits for the node's plugin calls to stop.
	hostilePhase := func() phaseFigures {
		loop0, hungry0 := failures()
		hctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, hc := range bait {
			wg.Go(func() {
				for hctx.Err() == nil {
					_, _ = hc.Poll(hctx) // failures are the point
				}
			})
		}
		for {
			loop, hungry := failures()
			if loop > loop0 && hungry > hungry0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		f := measure("beside")
		stop()
		wg.Wait()
		// Calls the node started go on to their deadline: wait until the
		// failure counts hold still.
		for prevL, prevH := failures(); ; {
			time.Sleep(300 * time.Millisecond)
			loop, hungry := failures()
			if loop == prevL && hungry == prevH {
				break
			}
			prevL, prevH = loop, hungry
		}
		return f
	}

	type variant struct {
		name         string
		procs        int
		base, beside []phaseFigures
	}
	variants := []*variant{
		{name: "as ledge serve runs it, GOMAXPROCS at the CPUs, the workers taking theirs from the node's", procs: procs},
		{name: "the workers with processors of their own", procs: withWorkers},
	}
	load := loadAverage()
	b.ResetTimer()
	for i := range b.N * rounds {
		// Every other round runs the same phases in reverse order.
		order := []func(){}
		for _, v := range variants {
			order = append(order,
				func() { runtime.GOMAXPROCS(v.procs); v.base = append(v.base, measure("baseline")) },
				func() { runtime.GOMAXPROCS(v.procs); v.beside = append(v.beside, hostilePhase()) })
		}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, run := range order {
			run()
		}
	}
	b.StopTimer()
	// The verdicts first: the test framework keeps only the first ten
	// lines of a benchmark's log unless -v.
	b.Logf("load average %s before, %s after; %d CPUs", load, loadAverage(), runtime.NumCPU())
	for j, v := range variants {
		baseP99, besideP99 := medianP99(v.base), medianP99(v.beside)
		ratio := float64(besideP99) / float64(baseP99)
		verdict := "met"
		if ratio > 2 {
			verdict = "NOT met"
		}
		b.Logf("p99 ratio %.2f, %s (GOMAXPROCS %d): median p99 beside the hostile plugins %v ÷ median baseline p99 %v, %d phases each; target ≤ 2 %s",
			ratio, v.name, v.procs, besideP99.Round(time.Microsecond), baseP99.Round(time.Microsecond), len(v.base), verdict)
		unit := ""
		if j > 0 {
			unit = "-ownprocs"
		}
		b.ReportMetric(float64(baseP99.Microseconds()), "base-p99-us"+unit)
		b.ReportMetric(float64(besideP99.Microseconds()), "beside-p99-us"+unit)
		b.ReportMetric(ratio, "p99-ratio"+unit)
	}
	for _, v := range variants {
		b.Logf("GOMAXPROCS %d, phase by phase:", v.procs)
		for i := range v.base {
			b.Logf("  round %d: %v", i+1, v.base[i])
			b.Logf("  round %d: %v", i+1, v.beside[i])
		}
	}
}

// phaseFigures are the honest consumer's poll latencies in one phase, and
// what the Go runtime saw meanwhile.
type phaseFigures struct {
	kind          string
	polls         int
	p50, p99, max time.Duration
	rt            runtimeFigures
}

func newPhaseFigures(kind string, lat []time.Duration, rt runtimeFigures) phaseFigures {
	slices.Sort(lat)
	return phaseFigures{kind: kind, polls: len(lat), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], max: lat[len(lat)-1], rt: rt}
}

func (f phaseFigures) String() string {
	return fmt.Sprintf("%-8s %5d polls, p50 %v p99 %v max %v; %v", f.kind, f.polls, f.p50.Round(time.Microsecond),
		f.p99.Round(time.Microsecond), f.max.Round(time.Microsecond), f.rt)
}

func medianP99(fs []phaseFigures) time.Duration {
	p99s := make([]time.Duration, len(fs))
	for i, f := range fs {
		p99s[i] = f.p99
	}
	slices.Sort(p99s)
	return p99s[len(p99s)/2]
}

// loadAverage is the machine's load average (1, 5 and 15 minutes) where
// the system tells it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "(unknown)"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "(unknown)"
	}
	return strings.Join(f[:3], " ")
}
