package sim

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/ledgemq/ledge/engine"
)

var groupSeedsFlag = flag.Int("group.seeds", 0, "number of seeds of TestSimGroups and TestSimState (default 50 and 30; 15 and 10 with -short); -seeds sets them too")

// groupConfig is the configuration of the group simulation: the storage
// ops with fewer armed faults (each fault soon brings a restart, and the
// group needs time between restarts to rebalance) and the group's ops.
func groupConfig(logf func(string, ...any)) Config {
	gens := DefaultGenerators()
	for i, g := range gens {
		switch g.Name {
		case "fault":
			weight := g.Weight
			gens[i].Weight = func(w *World) int { return weight(w) / 3 }
		case "restart":
			weight := g.Weight
			gens[i].Weight = func(w *World) int { return max(2, weight(w)) - 1 }
		}
	}
	return Config{
		Steps:      *stepsFlag,
		Settle:     synctest.Wait,
		Generators: append(gens, GroupGenerators()...),
		Checks:     GroupChecks(),
		Logf:       logf,
		States:     *statesFlag && logf != nil,
	}
}

func runGroupSeedWith(t *testing.T, seed uint64, logf func(string, ...any), state bool) Result {
	var r Result
	synctest.Test(t, func(t *testing.T) {
		cfg := groupConfig(logf)
		cfg.StateStore = state
		r = Run(seed, cfg)
	})
	return r
}

// TestSimGroups runs the storage simulation with a consumer group on top:
// three members of one group subscribed to both topics join, leave,
// heartbeat (prompt, slow, lost), pause past their session timeout, poll
// "next" with every commit mode (some polls racing a leave, an expiry, a
// rejoin or a revocation while their read is in flight), commit promptly,
// on revocation and late (across reassignments, regains, rejoins and
// restarts), and reset; the coordinator is the node's own, wired over the
// simulator's owners as the node wires it, and every restart (clean,
// crash, power loss) takes the membership away, so the members find out
// and join again. Besides every check of TestSim, after every step:
//
//   - an offset is applied only for the member the owner has holding the
//     partition, with a token of the assignment installed now and of the
//     current history; nothing of an earlier assignment, incarnation or
//     process is ever applied (G31, G32);
//   - the group's committed offset never moves back except by a reset,
//     and after a restart it is one written, at least the last one
//     acknowledged (G33);
//   - a partition leaves its holder only once the holder confirmed the
//     revocation, left, joined again or was removed by a timeout; owners
//     hold exactly what the coordinator says (G34);
//   - at most one member holds a token the owner would accept, per
//     partition (G35);
//   - member epochs never repeat: a join is above every epoch handed out
//     before, a member's epoch never goes back, the group epoch never goes
//     back, assignment epochs of a partition only increase, and after a
//     restart (a power loss too) every epoch is above every epoch before
//     it (G36);
//   - "next" resumes at the member's own delivered position while its
//     token is current and at the committed offset otherwise; a poll by a
//     member that does not hold the partition is refused, one that does is
//     answered, and none completes across a change of its holder (G37);
//   - after a restart no token from before it is accepted: the members
//     must join again (G38).
//
// Replay a failure with go test ./internal/sim -run SimGroups -seed N -v.
//
// covers: G31 G32 G33 G34 G35 G36 G37 G38
func TestSimGroups(t *testing.T) { runGroupSeeds(t, false, 15, 50) }

// runGroupSeeds runs the group simulation (with the state store if state)
// for -seed alone, or for the seeds planSeeds picks (-group.seeds or
// -seeds from -seed-base, or the default ones).
func runGroupSeeds(t *testing.T, state bool, short, def int) {
	if *seedFlag >= 0 {
		r := runGroupSeedWith(t, uint64(*seedFlag), t.Logf, state)
		if r.Err != nil {
			t.Fatal(r.Report(80))
		}
		return
	}
	n := *groupSeedsFlag
	if n == 0 {
		n = *seedsFlag
	}
	kind := "groups"
	if state {
		kind = "state"
	}
	planSeeds(kind, n, short, def).run(t, func(t *testing.T, seed uint64) {
		if r := runGroupSeedWith(t, seed, nil, state); r.Err != nil {
			t.Fatal(r.Report(80))
		}
	})
}

// TestSimGroupsReplaysExactly: a seed of the group simulation, and of
// its state-store variant, replays step by step.
func TestSimGroupsReplaysExactly(t *testing.T) {
	for i, seed := range []uint64{5, 11} {
		state := i == 1
		a := runGroupSeedWith(t, seed, nil, state)
		b := runGroupSeedWith(t, seed, nil, state)
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

// TestSimState runs the group simulation with members that count records
// per key and keep the counts in the partitions' fenced state stores: a
// member that receives a partition loads its state with the offset it
// belongs to and reads on from there, counting each record, and commits
// the changed counts with its offset in one call; members are fenced,
// pause past their session timeout, commit late, rebalance, and the node
// restarts (power loss too). Besides the checks of TestSimGroups, after
// every step and every recovery:
//
//   - every state committed is the exact fold of the records its counts
//     include, and no record is counted twice along a chain of loads and
//     commits (effectively-once state on top of at-least-once delivery);
//   - the store holds the state committed with the bookmark stored beside
//     it, after every recovery too: state never runs ahead of or behind
//     its offset; a load returns them together and resumes where the
//     bookmark resolves;
//   - only the holder's current assignment writes state: a stale member's
//     state commit writes nothing.
//
// Replay a failure with go test ./internal/sim -run SimState -seed N -v.
//
// covers: G39
func TestSimState(t *testing.T) { runGroupSeeds(t, true, 10, 30) }

// A member commits, polls again and keeps its token; the node loses power.
// The member learns it is unknown, joins again above every epoch handed
// out before, and its token from before the power loss is refused before
// and after it joined again; its next poll resumes at the committed
// offset, and every check of TestSimGroups holds after each step.
//
// covers: G36 G38
func TestGroupTokenStaleAfterPowerLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, step := scenarioWorld(t, false)
		a0 := keyOf(w.TopicNamed("a").Parts[0])
		step(produceOp{p: w.TopicNamed("a").Parts[0], n: 5}, "acknowledged")
		step(joinOp{member: "m0"}, "epoch 1, owns [a/0@1 b/0@1]")
		step(groupPollOp{member: "m0", k: a0, maxBytes: 1 << 20}, "5 records from 0, next 5")
		step(groupCommitOp{member: "m0", k: a0}, "commit 5 ok")
		step(produceOp{p: w.TopicNamed("a").Parts[0], n: 3}, "acknowledged")
		step(groupPollOp{member: "m0", k: a0, maxBytes: 1 << 20}, "3 records from 5, next 8")
		c := w.member("m0")
		old := lateCommit{member: "m0", part: a0, tok: c.tokens[a0], offset: 8}
		before := w.gm.maxEpoch

		step(restartOp{kind: RestartPowerLoss, pct: 0}, "power-loss")
		w.gm.late = []lateCommit{old}
		step(lateCommitOp{}, "refused: fence: unknown member")
		step(heartbeatOp{member: "m0"}, "unknown member; joined")
		if c.epoch <= before {
			t.Fatalf("joined again at epoch %d, not above %d", c.epoch, before)
		}
		w.gm.late = []lateCommit{old}
		step(lateCommitOp{}, "refused: fence:")
		step(groupPollOp{member: "m0", k: a0, maxBytes: 1 << 20}, "3 records from 5, next 8")
	})
}

// The stale state write of a fenced member, told step by step: A reads
// and counts four records but stalls before committing; its session runs
// out and B takes the partition, loads the (empty) state, counts all ten
// records and commits its state with offset 10. A's commit of its state
// at 4 arrives late: refused, and the store keeps B's. The node loses
// power; C joins, loads B's state with offset 10, counts the records
// appended since (numbered after a gap: the restart) and commits; after
// every step the store holds the exact fold of the
// records its offset covers, each counted once.
//
// covers: G39
func TestStateStaleWriteAfterHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, step := scenarioWorld(t, true)
		p := w.TopicNamed("a").Parts[0]
		a0 := keyOf(p)
		for range 5 {
			step(produceOp{p: p, n: 2}, "acknowledged")
		}
		step(joinOp{member: "m0"}, "owns [a/0@1 b/0@1]")
		step(groupPollOp{member: "m0", k: a0, maxBytes: 1}, "loaded 0 keys at 0; 2 records from 0, next 2")
		step(groupPollOp{member: "m0", k: a0, maxBytes: 1}, "2 records from 2, next 4")
		tok, off, sc, _ := w.pendingCommit(w.member("m0"), a0)
		stale := lateCommit{member: "m0", part: a0, tok: tok, offset: off, state: sc}
		step(pauseOp{member: "m0"}, "paused")
		step(joinOp{member: "m1"}, "joined")
		step(roundOp{beats: 6}, "m1 e")
		if g := w.gm.installed[a0]; g.member != "m1" {
			t.Fatalf("a/0 is held by %v, want m1\n%s", g, strings.Join(w.trace, "\n"))
		}
		step(groupPollOp{member: "m1", k: a0, maxBytes: 1 << 20}, "loaded 0 keys at 0; 10 records from 0, next 10")
		step(groupCommitOp{member: "m1", k: a0}, "commit 10 ok")
		w.gm.late = []lateCommit{stale}
		step(lateCommitOp{}, "commit 4 refused: fence: unknown member")

		step(restartOp{kind: RestartPowerLoss, pct: 0}, "power-loss")
		step(joinOp{member: "m2"}, "owns [a/0@")
		step(produceOp{p: w.TopicNamed("a").Parts[0], n: 4}, "acknowledged")
		step(groupPollOp{member: "m2", k: a0, maxBytes: 1 << 20}, "loaded 4 keys at 10; 4 records from 10, next ")
		step(groupCommitOp{member: "m2", k: a0}, " ok")
		step(restartOp{kind: RestartPowerLoss, pct: 0}, "power-loss")
	})
}

// scenarioWorld opens a one-partition world with the group checks (and the
// state store if state) inside the test's synctest bubble, creates topics
// "a" and "b" of one partition each, and returns it with step, which runs
// an op and fails the test unless its output contains want. The world shuts
// down when the test ends.
func scenarioWorld(t *testing.T, state bool) (*World, func(op Op, want string) string) {
	t.Helper()
	w := newWorld(1, Config{Settle: synctest.Wait, Checks: GroupChecks(), StateStore: state})
	if err := w.open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.shutdown()
		synctest.Wait()
	})
	step := func(op Op, want string) string {
		t.Helper()
		w.step++
		out, err := w.Do(op)
		if err != nil {
			t.Fatalf("%s: %v\n%s", op, err, strings.Join(w.trace, "\n"))
		}
		if !strings.Contains(out, want) {
			t.Fatalf("%s: %q, want %q\n%s", op, out, want, strings.Join(w.trace, "\n"))
		}
		return out
	}
	cfg := engine.TopicConfig{Partitions: 1, Durability: engine.DurabilityAlways, SyncInterval: sim50ms, SegmentBytes: 4096, MaxBatchBytes: 1024}
	step(createWithOp{name: "a", cfg: cfg}, "")
	step(createWithOp{name: "b", cfg: cfg}, "")
	return w, step
}
