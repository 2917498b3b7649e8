// Package sim is Ledge's deterministic simulator of the storage path: it
// runs the real storage engine and the real partition owners on a
// simulated disk, drives them with seeded schedules of operations and
// failures, and checks after every step, and after every recovery, that
// nothing a client was promised was lost or mixed up.
//
// It is a test harness, not a model checker and not API: the schedules
// are random, the checks are the invariants of docs/FENCING.md's storage
// guarantees (G21–G27), group guarantees (G31–G38) and state guarantee
// (G39), and a failing seed replays exactly.
//
// # What runs
//
// A World is one node without its listeners: an engine.Engine on a Disk,
// an owner.Owner per partition (wired as the node wires them), the
// registries of consumer sessions and producers, and the consumer-group
// coordinator (group.Groups), opened from the metadata store before the
// owners and driving them through group.FuncTopics, as the node does. It
// imports no part of node beyond node/owner and node/group (a test keeps
// it so: internal/layout). Ops act on it one at a time: appends,
// polls (named consumers with each commit mode, and anonymous ones),
// manual commits, purges (some racing an append), retention, time
// passing, topic deletion and re-creation, work sent to deleted topics,
// session attaches and producer inits, armed faults and restarts.
//
// # The disk
//
// Disk stacks a crashable vfs.MemFS, vfs/errorfs (injected failures of
// segment, index, directory and metadata-WAL fsyncs, and of segment
// reads, which every read of the engine's read path makes through its
// fault hook and reader pool; one armed at a time, failing the first
// matching call) and a fault layer of its own (view.go)
// for what errorfs cannot express: a failed fsync that drops the file's
// unsynced data as Linux does after a writeback error (the page cache
// keeps the new bytes, a later fsync writes nothing, a power loss returns
// the old ones); a power loss that garbles a sector being written; and a
// dead process whose engine can be closed without touching the disk.
// Restarts are clean, a process crash (the page cache survives), or a
// power loss keeping a random share of what was not synced (crash.go).
// The disk also fills up (space.go): with a few bytes of room left, a
// write that does not fit writes what fits and fails with ENOSPC, and
// removals give room back, until the operator frees space. The metadata
// store's files and a roll's zeroing of a torn tail are left out of the
// full disk for now (FullDiskMode says why); TestFullDiskChecksBite
// turns them on, and shows the checks fail.
//
// # Determinism
//
// A run is a function of its seed: every random choice is drawn from one
// generator in op order; topic ids come from a seeded reader
// (engine.Options.Rand); the run executes inside a testing/synctest bubble,
// where time is fake and Config.Settle (synctest.Wait) returns once every
// goroutine of the engine and of pebble is idle, so each op's file
// operations happen before the next op starts; pebble's automatic
// compactions are off and its memtables large enough never to rotate
// during a run; and power-loss images are built in sorted order (MemFS's
// own CrashClone draws its random numbers in map order). The engine helps:
// a partition's file writes, removals and own metadata writes are made by
// its flusher, so they happen in the partition's order.
//
// # The checks
//
// The model (model.go) knows every offset handed out and the value of its
// record, what was acknowledged, what readers could see, the purges and
// deletions acknowledged or in doubt, and every bookmark the owners wrote
// (reported by the log adapter as it happens). checks.go compares: reads
// against the values (no offset reused, nothing below the start, nothing
// past the high watermark); "next" polls against the resolution rules of
// FENCING.md; each poll's range against the log; lineages against the
// transitions the model can explain; and after each restart, the whole log
// against what must have survived, where numbering resumes (under always
// at the log's end: the model then forgets the offsets handed out past it,
// never acknowledged nor seen) and the skipped ranges recorded, the disk
// against the obligations that must be finished, and the bookmarks against
// those written.
//
// # Groups and state
//
// Op and Generator are the extension points, Config.Checks the
// invariants run after every step. The consumer-group simulation
// (groups.go, group_*.go) adds GroupGenerators and GroupChecks: three
// members of one group join, leave, heartbeat (prompt, slow, lost), pause
// past their session timeout, poll "next" with each commit mode (some
// racing a change of their membership while the read is in flight),
// commit promptly, on revocation and late, and reset, while the storage
// ops go on, restarts included. The model learns what the coordinator
// tells the members, every assignment it installs on an owner (observed
// on the way) and every group bookmark the owners write, and checks the
// fence: only the holder's current assignment is applied, offsets never
// go back, hand-over waits for the holder, at most one member holds an
// accepted token, and epochs never repeat, not even across a power loss.
// With Config.StateStore (state.go), the members count records per key
// in the partitions' fenced state stores instead, and the model checks
// that the store always holds the exact fold of the records its offset
// covers, each counted once.
//
// Run a seed with its trace:
//
//	go test ./internal/sim -run Sim -seed N -v [-states]
//	go test ./internal/sim -run 'SimGroups$|SimState$' -seed N -v
//
// # Which seeds run
//
// By default each simulation runs its fixed seeds (TestSim 0-199,
// TestSimGroups 0-49, TestSimState 0-29), the seeds that once found a
// violation, and a window that moves with each commit (100, 20 and 10
// seeds from a start derived from the commit: LEDGE_SIM_COMMIT, or the
// work tree's HEAD; "off" for none), named in the test's log with the
// flags that run it again; -short runs 40, 15 and 10 fixed seeds. Any
// window runs with -seeds N -seed-base B (-group.seeds N for the group
// and state runs alone). Seeds run in parallel, one synctest bubble per
// core (-parallel).
//
// # Speed, and a deep pass
//
// A storage seed (150 steps) costs about 33 ms of CPU, a group seed
// about 25 ms and a state seed about 30 ms: about 30 storage seeds per
// second per idle core (400 seeds in 13 s of CPU; most of it is the
// restarts: pebble's open and the segments' recovery). A deep pass of
// 100,000 storage seeds, 20,000 group and 20,000 state seeds is about 75
// minutes of one core; on a shared machine, in the background:
//
//	cd internal/sim && go test -c
//	nice -n 19 ./sim.test -test.timeout 0 -test.run '^TestSim$' -seeds 100000
//	nice -n 19 ./sim.test -test.timeout 0 -test.run '^TestSimGroups$|^TestSimState$' -group.seeds 20000
//
// A run of more than 5,000 seeds reports its progress and rate every
// 1,000 seeds on stderr.
package sim
