package sim

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/node/owner"
)

// Scenarios are the simulator's ops, chosen by hand and told as a story
// (testdata/*), with every invariant of TestSim checked after each step.
// Commands:
//
//	topic name=T durability=always|interval|none [partitions=N]
//	produce topic=T [partition=P] n=N [times=K]
//	poll topic=T consumer=manual|delivery|nextpoll [max=BYTES]
//	poll topic=T from=first|end|offset=N
//	commit topic=T [consumer=manual]
//	purge topic=T [race]
//	retention topic=T
//	arm fault=NAME [drop]
//	tick d=DURATION
//	restart kind=clean|crash|power-loss [unsynced=PCT] [keep=BASE,...] [lose=BASE,...]
//	disk full [room=BYTES] | disk free    a full disk, and room again
//	delete topic=T
//	state topic=T          the partition's offsets, history and health
//	files topic=T          its segment files on the disk
//	bookmarks topic=T      the bookmarks stored for the partition
//	old topic=T do=produce|poll|commit   work on the deleted topic T
//	stale-commit topic=T   a commit on T with a token of the deleted T
//	reset                  a new node on a new disk
func runScenario(t *testing.T, path string) {
	synctest.Test(t, func(t *testing.T) {
		var w *World
		start := func() {
			w = newWorld(1, Config{Settle: synctest.Wait})
			if err := w.open(); err != nil {
				t.Fatal(err)
			}
		}
		start()
		defer func() {
			w.shutdown()
			synctest.Wait()
		}()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			w.step++
			run := func(op Op) string {
				out, err := w.Do(op)
				if err != nil {
					t.Fatalf("%s: %v\n%s", d.Pos, err, strings.Join(w.trace, "\n"))
				}
				return out
			}
			str := func(key, def string) string {
				if !d.HasArg(key) {
					return def
				}
				var v string
				d.ScanArgs(t, key, &v)
				return v
			}
			num := func(key string, def int) int {
				if !d.HasArg(key) {
					return def
				}
				var v int
				d.ScanArgs(t, key, &v)
				return v
			}
			part := func() *Partition {
				top := w.TopicNamed(str("topic", ""))
				if top == nil {
					t.Fatalf("%s: no topic %q", d.Pos, str("topic", ""))
				}
				return top.Parts[num("partition", 0)]
			}
			switch d.Cmd {
			case "reset":
				w.shutdown()
				synctest.Wait()
				start()
				return "ok"
			case "topic":
				dur, err := engine.ParseDurability(str("durability", "always"))
				if err != nil {
					t.Fatal(err)
				}
				cfg := engine.TopicConfig{Partitions: num("partitions", 1), Durability: dur,
					SyncInterval: sim50ms, SegmentBytes: 4096, MaxBatchBytes: 1024}
				return run(createWithOp{name: str("name", ""), cfg: cfg})
			case "produce":
				var outs []string
				p, n := part(), num("n", 1)
				for range num("times", 1) {
					outs = append(outs, run(produceOp{p: p, n: n}))
				}
				if len(outs) > 3 {
					outs = append(outs[:1], "...", outs[len(outs)-1])
				}
				return strings.Join(outs, "\n")
			case "poll":
				op := pollOp{p: part(), maxBytes: num("max", 1<<20)}
				switch {
				case d.HasArg("consumer"):
					op.consumer, op.from = str("consumer", ""), owner.FromNext
				case d.HasArg("offset"):
					op.from, op.offset = owner.FromOffset, uint64(num("offset", 0))
				default:
					op.from = map[string]owner.Position{"first": owner.FromFirst, "end": owner.FromEnd, "last": owner.FromLast}[str("from", "first")]
				}
				return run(op)
			case "commit":
				return run(commitOp{p: part()})
			case "purge":
				return run(purgeOp{p: part(), race: d.HasArg("race")})
			case "retention":
				return run(retentionOp{p: part()})
			case "arm":
				k, err := ParseFault(str("fault", ""))
				if err != nil {
					t.Fatal(err)
				}
				return run(faultOp{Fault{Kind: k, Drop: d.HasArg("drop")}})
			case "tick":
				dur, err := time.ParseDuration(str("d", "100ms"))
				if err != nil {
					t.Fatal(err)
				}
				return run(tickOp{dur})
			case "restart":
				kind := map[string]RestartKind{"clean": RestartClean, "crash": RestartCrash, "power-loss": RestartPowerLoss}[str("kind", "")]
				// keep= and lose= name unsynced new segments (by base
				// offset) whose directory entries the power loss keeps or
				// loses, whatever unsynced= says.
				var fates map[string]bool
				for _, arg := range []string{"keep", "lose"} {
					if !d.HasArg(arg) {
						continue
					}
					var bases []string
					d.ScanArgs(t, arg, &bases)
					for _, b := range bases {
						var base uint64
						if _, err := fmt.Sscan(b, &base); err != nil {
							t.Fatalf("%s: %s=%s: %v", d.Pos, arg, b, err)
						}
						if fates == nil {
							fates = map[string]bool{}
						}
						fates[fmt.Sprintf("%020d.log", base)] = arg == "keep"
					}
				}
				return run(restartOp{kind: kind, pct: num("unsynced", 0), garbage: -1, fates: fates})
			case "disk":
				// disk full room=N | disk free
				if d.HasArg("full") {
					return run(fillOp{room: int64(num("room", 0))})
				}
				return run(freeOp{})
			case "delete":
				return run(deleteOp{name: str("topic", "")})
			case "old":
				// Work sent to the partition of the deleted topic.
				z := w.zombie(str("topic", ""), num("partition", 0))
				what := map[string]int{"produce": 0, "poll": 1, "commit": 2}[str("do", "")]
				return run(zombieOp{p: z, what: what})
			case "stale-commit":
				// A commit on the live topic with a token of the deleted one.
				return run(recreatedCommitOp{zombie: w.zombie(str("topic", ""), num("partition", 0)), live: part()})
			case "state":
				return describeState(part())
			case "files":
				p := part()
				names, err := w.Disk.Mem().List(partitionDir(p.Topic.ID, p.Index))
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("segments %v", segmentBases(names))
			case "bookmarks":
				// What the engine stores, whoever wrote it.
				var out []string
				err := part().Engine.Bookmarks(func(key string, b engine.Bookmark) error {
					out = append(out, fmt.Sprintf("%s=%d@h%d", key, b.Offset, b.History))
					return nil
				})
				switch {
				case err != nil:
					return errClass(err)
				case len(out) == 0:
					return "none"
				}
				return strings.Join(out, " ")
			}
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			return ""
		})
	})
}

// The purge's metadata batch fails to sync: the purge is not acknowledged,
// and after a power loss the partition is entirely before or entirely
// after it — also when a restart without a power loss came in between and
// found the batch in the page cache.
//
// covers: G21
func TestPurgeBatchSyncFails(t *testing.T) {
	for _, name := range []string{"purge_batch_sync_fails", "purge_wal_drop_then_restarts"} {
		t.Run(name, func(t *testing.T) { runScenario(t, "testdata/"+name) })
	}
}

// A purge's cleanup removes the segment files but the directory fsync
// fails; writes go on; a power loss brings the files back: they are not
// served, old bookmarks are not applied, "next" reads the whole fresh
// history, and the fresh records survive. Under always and interval, and a
// control where every fsync succeeds.
//
// covers: G22 G23
func TestPurgeCleanupDirSyncFails(t *testing.T) {
	for _, name := range []string{"cleanup_dir_sync_fails_always", "cleanup_dir_sync_fails_interval", "cleanup_control"} {
		t.Run(name, func(t *testing.T) { runScenario(t, "testdata/"+name) })
	}
}

// An fsync of a segment fails during appends: nothing after it is
// acknowledged, the partition stops taking appends, and recovery keeps
// exactly what was durable, whether the page cache still holds the rest
// (a process restart) or not (a power loss). With the metadata store
// failed too, recovery cannot know where the durable part ended: what it
// keeps, it makes durable.
//
// covers: G24
func TestSegmentSyncFails(t *testing.T) {
	for _, name := range []string{"segment_sync_fails_always", "segment_sync_fails_interval", "segment_sync_fails_metadata_down"} {
		t.Run(name, func(t *testing.T) { runScenario(t, "testdata/"+name) })
	}
}

// Under none, a consumer reads and commits records that a power loss then
// takes away: the recovery bumps the history epoch, the consumer's stale
// work is refused, and it resumes at the new history's start, reading
// every record appended since.
//
// covers: G25
func TestLossyRecoveryFencesConsumer(t *testing.T) {
	runScenario(t, "testdata/lossy_recovery_none")
}

// A topic is deleted while a consumer holds a token and a produce is
// pending; its work fails, and a topic re-created under the same name
// starts empty, before and after a power loss.
//
// covers: G26
func TestDeleteAndRecreate(t *testing.T) {
	runScenario(t, "testdata/delete_recreate")
}

// Under none, a power loss keeps the entry of a segment rolled by a purge
// and loses the entry of the segment before it, holding a record a
// consumer had read: recovery records the loss (kept nothing at or above
// the start), fences the consumer's commit, and does not take the
// surviving segment for a loss again at later restarts.
//
// covers: G25
func TestFirstSegmentLost(t *testing.T) {
	runScenario(t, "testdata/first_segment_lost_none")
}

// A full disk refuses appends with a retryable error and fails nothing;
// once there is room again appends resume, and what was acknowledged
// survives a power loss.
//
// covers: G28
func TestFullDisk(t *testing.T) {
	for _, name := range []string{"full_disk", "stale_index_full_disk"} {
		t.Run(name, func(t *testing.T) { runScenario(t, "testdata/"+name) })
	}
}
