package sim

import (
	"flag"
	"slices"
	"testing"
	"testing/synctest"
)

var (
	seedFlag   = flag.Int64("seed", -1, "run only this seed, with its whole trace (replays a failure exactly)")
	seedsFlag  = flag.Int("seeds", 0, "number of seeds to run, from -seed-base (default: seeds 0-199, the regression seeds and the commit's window; 0-39 with -short)")
	stepsFlag  = flag.Int("steps", 0, "ops per seed (default 150)")
	statesFlag = flag.Bool("states", false, "with -seed: trace every partition's state after each step")
)

// runSeed runs one seed in its own synctest bubble.
func runSeed(t *testing.T, seed uint64, logf func(string, ...any)) Result {
	var r Result
	synctest.Test(t, func(t *testing.T) {
		r = Run(seed, Config{Steps: *stepsFlag, Settle: synctest.Wait, Logf: logf, States: *statesFlag && logf != nil})
	})
	return r
}

// TestSim runs the storage simulation over many seeds: the engine and the
// partition owners on a simulated disk, with appends, polls, commits,
// purges (some racing an append), retention, topic deletion and
// re-creation, injected fsync failures (files, directories, the metadata
// WAL; some dropping the file's unsynced data) and segment read failures,
// a full disk, process crashes and power losses, checking after every
// step and every recovery:
//
//   - every append acknowledged under durability always is readable;
//     an append whose acknowledgement failed never comes back;
//   - nothing below the start offset is returned; no offset holds two
//     records; a recovery that lost records a reader could see bumped the
//     history epoch (a lossy-recovery transition whose kept end is below
//     them), and never under always;
//   - a recovery under always numbers on from the log's end, skipping
//     nothing (offsets handed out past it were never acknowledged nor
//     seen, and may be handed out again); under every policy the offsets
//     between the log's last record and where numbering resumes are
//     recorded as skipped;
//   - the owner never writes a bookmark of an older history; a commit
//     with a token of an older history (or of a deleted topic) is
//     refused; "next" resumes where the rules say (after a purge: the
//     purge's start, so the whole fresh history is read), and a poll
//     returns every record of its range;
//   - history transitions are explained by acknowledged (or in-doubt)
//     purges and lossy recoveries; history is never rewritten, so epochs
//     never repeat;
//   - recovery serves with no cleanup obligation pending, no segment file
//     below the start and no directory of a deleted topic; a failed purge
//     or deletion leaves the node entirely before or after it; a deleted
//     topic stays deleted, its work fails, and its successor starts empty;
//   - a full disk (short writes and ENOSPC, the ballast released) refuses
//     appends and fails no partition, and appends resume once there is
//     room again (TestFullDiskChecksBite shows these checks fail when
//     their rule is broken).
//
// A failure prints its seed and trace; replay it with
// go test ./internal/sim -run Sim -seed N -v.
//
// covers: G21 G22 G23 G24 G25 G26 G27 G28
func TestSim(t *testing.T) {
	if *seedFlag >= 0 {
		seed := uint64(*seedFlag)
		r := runSeed(t, seed, t.Logf)
		if r.Err != nil {
			t.Fatal(r.Report(60))
		}
		return
	}
	planSeeds("storage", *seedsFlag, 40, 200).run(t, func(t *testing.T, seed uint64) {
		if r := runSeed(t, seed, nil); r.Err != nil {
			t.Fatal(r.Report(60))
		}
	})
}

// TestSimReplaysExactly: a seed's run is the same every time, down to the
// outcome of every step, so a failing seed can be replayed.
func TestSimReplaysExactly(t *testing.T) {
	for _, seed := range []uint64{3, 17, 29} {
		a := runSeed(t, seed, nil)
		b := runSeed(t, seed, nil)
		if !slices.Equal(a.Trace, b.Trace) {
			for i := range min(len(a.Trace), len(b.Trace)) {
				if a.Trace[i] != b.Trace[i] {
					t.Fatalf("seed %d diverged at line %d:\n  %s\n  %s", seed, i, a.Trace[i], b.Trace[i])
				}
			}
			t.Fatalf("seed %d: traces of %d and %d lines", seed, len(a.Trace), len(b.Trace))
		}
	}
}
