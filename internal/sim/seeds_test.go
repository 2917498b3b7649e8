package sim

import (
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var seedBaseFlag = flag.Uint64("seed-base", 0, "first seed of -seeds N (and of -group.seeds N): runs seeds base to base+N-1")

// regressionSeeds are seeds that once found a violation, run on every
// full run besides the fixed ones. (The generator has grown since, so
// they no longer replay their stories, which live in testdata; they stay
// as more breadth.)
var regressionSeeds = map[string][]uint64{
	// A power loss kept a rolled segment's entry and lost the one before
	// it (testdata/first_segment_lost_none).
	"storage": {1780, 1789, 1871, 2224, 3046, 3172, 3256, 3673, 3700, 3790, 3854},
	"groups":  {361},
	// 4660: an append refused for lack of space, taken for a loss after
	// the metadata store failed. 13941: a leave racing a poll failed the
	// metadata store unnoted, and the next check took the failed store
	// for a fault of the state store. 19672: a state commit refused by a
	// failed WAL sync and lost to a power loss, its offset committed again
	// with another state, taken for two states at one bookmark. (All
	// three were the model's.)
	"state": {4660, 13941, 19672},
}

// windowSize is the number of seeds of the window that moves with each
// commit (per simulation, beside the fixed ones).
var windowSize = map[string]uint64{"storage": 100, "groups": 20, "state": 10}

// seedPlan is what a simulation test runs.
type seedPlan struct {
	seeds []uint64
	about string // for the log: where the seeds come from
}

// planSeeds returns the seeds a simulation (kind: storage, groups or
// state) runs: with -seeds N (or n > 0, a count of its own flag), seeds
// -seed-base to -seed-base+N-1 and nothing else; otherwise the fixed
// seeds 0 to def-1 (short under -short), and, unless -short, the
// regression seeds and a window of seeds derived from the commit being
// tested (commitWindow), so that each commit looks somewhere new and a
// failure names a seed that replays.
func planSeeds(kind string, n, short, def int) seedPlan {
	if n > 0 {
		p := seedPlan{about: fmt.Sprintf("seeds %d to %d", *seedBaseFlag, *seedBaseFlag+uint64(n)-1)}
		for i := range uint64(n) {
			p.seeds = append(p.seeds, *seedBaseFlag+i)
		}
		return p
	}
	if testing.Short() {
		def = short
	}
	var p seedPlan
	for i := range uint64(def) {
		p.seeds = append(p.seeds, i)
	}
	p.about = fmt.Sprintf("seeds 0 to %d", def-1)
	if testing.Short() {
		return p
	}
	p.seeds = append(p.seeds, regressionSeeds[kind]...)
	if base, commit, ok := commitWindow(kind); ok {
		for i := range windowSize[kind] {
			p.seeds = append(p.seeds, base+i)
		}
		p.about += fmt.Sprintf(", the regression seeds, and the window of commit %s: seeds %d to %d (-seeds %d -seed-base %d)",
			commit, base, base+windowSize[kind]-1, windowSize[kind], base)
	}
	return p
}

// commitWindow derives the first seed of a window from the commit being
// tested: LEDGE_SIM_COMMIT if set ("off": no window), else the work
// tree's HEAD. Windows start at a million, above every fixed seed, and
// differ per simulation.
func commitWindow(kind string) (uint64, string, bool) {
	commit := os.Getenv("LEDGE_SIM_COMMIT")
	if commit == "" {
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			return 0, "", false
		}
		commit = strings.TrimSpace(string(out))
	}
	if commit == "off" || commit == "" {
		return 0, "", false
	}
	h := fnv.New64a()
	h.Write([]byte(kind + "/" + commit))
	return 1_000_000 + h.Sum64()%(1<<32), commit[:min(len(commit), 12)], true
}

// run runs each seed of the plan with check in a subtest named after it,
// as many at once as the tests' parallelism (GOMAXPROCS by default: one
// synctest bubble per core). A long plan (a deep pass) reports its
// progress, rate and failures every 1,000 seeds on stderr, and each
// failing seed at once.
func (p seedPlan) run(t *testing.T, check func(t *testing.T, seed uint64)) {
	t.Logf("%s", p.about)
	workers := max(1, runtime.GOMAXPROCS(0))
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			workers = n
		}
	}
	seeds := make(chan uint64)
	var wg sync.WaitGroup
	var done, failed atomic.Int64
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for seed := range seeds {
				if !t.Run(fmt.Sprint(seed), func(t *testing.T) { check(t, seed) }) {
					// A subtest's failure is printed when its parent ends:
					// a long pass names its failing seeds as it goes.
					failed.Add(1)
					if len(p.seeds) > 5000 {
						fmt.Fprintf(os.Stderr, "%s: seed %d failed\n", t.Name(), seed)
					}
				}
				if n := done.Add(1); len(p.seeds) > 5000 && n%1000 == 0 {
					el := time.Since(start)
					fmt.Fprintf(os.Stderr, "%s: %d of %d seeds in %v (%.1f seeds/s), %d failed\n", t.Name(), n, len(p.seeds), el.Round(time.Second), float64(n)/el.Seconds(), failed.Load())
				}
			}
		})
	}
	for _, s := range p.seeds {
		seeds <- s
	}
	close(seeds)
	wg.Wait()
}
