package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
)

// World is one simulated node: a disk, the engine running on it, the
// partition owners, and the model the checks compare them with. Ops act on
// it one at a time; between two ops every goroutine of the engine is idle
// (Config.Settle).
type World struct {
	// Rng is the run's only source of randomness: every choice of the
	// schedule and of a power loss is drawn from it, in op order.
	Rng  *rand.Rand
	Disk *Disk
	Ctx  context.Context

	cfg    Config
	opts   engine.Options
	eng    *engine.Engine
	meta   owner.Metadata
	topics map[string]*Topic // live topics by name
	// zombies are partitions of deleted topics, still held: work on them
	// must fail.
	zombies []*Partition
	models  map[fence.TopicID]*topicModel
	names   []string // the topic names the schedule uses

	// consumer is the named consumer on whose behalf the current op runs.
	consumer string
	// race, if set, is run once by the next purge between its barrier and
	// its metadata batch.
	race func()

	// creating holds names whose creation failed: a restart may find them.
	creating map[string]bool

	counters *counters

	// groups is the running process's group coordinator; gm the model of
	// the group the members share.
	groups *group.Groups
	gm     *groupModel

	metaFailed bool
	step       int
	violations []string
	trace      []string
}

// Topic is a live topic.
type Topic struct {
	Name  string
	ID    fence.TopicID
	Parts []*Partition
	m     *topicModel
}

// Partition is a live partition (or a zombie of a deleted topic).
type Partition struct {
	Topic  *Topic
	Index  int
	Engine *engine.Partition
	Owner  *owner.Owner
	log    *ownerLog
	m      *partModel
}

func (p *Partition) String() string { return fmt.Sprintf("%s/%d", p.Topic.Name, p.Index) }

// Violation is an invariant the code under test broke.
type Violation struct {
	Step int
	What []string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("step %d: %s", v.Step, strings.Join(v.What, "; "))
}

// Violate records a broken invariant; the run stops after the op.
func (w *World) Violate(format string, args ...any) { w.violate(format, args...) }

// violate records a broken invariant; the run stops after the op.
func (w *World) violate(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

// Tracef adds a line to the run's trace.
func (w *World) Tracef(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	w.trace = append(w.trace, line)
	if w.cfg.Logf != nil {
		w.cfg.Logf("%s", line)
	}
}

func newWorld(seed uint64, cfg Config) *World {
	w := &World{
		Rng:    rand.New(rand.NewPCG(seed, 0x5eed)),
		Disk:   NewDisk().withMode(cfg.FullDisk),
		Ctx:    context.Background(),
		cfg:    cfg,
		topics: map[string]*Topic{},
		models: map[fence.TopicID]*topicModel{},
		names:  []string{"a", "b"},

		creating: map[string]bool{},
		counters: newCounters(),
		gm:       newGroupModel(),
	}
	w.gm.state = cfg.StateStore
	w.opts = engine.Options{
		Dir:            "data",
		TailCacheBytes: []int{-1, 4 << 10, 1 << 20}[w.Rng.IntN(3)],
		// A ballast (released at the first write that hits a full disk)
		// in half the runs; drawn from a generator of its own, so that
		// the schedules drawn from Rng stay what they were.
		ReservedBytes:   []int64{-1, 8 << 10}[rand.New(rand.NewPCG(seed, 0xba11a57)).IntN(2)],
		ReservationStep: uint64(8 + w.Rng.IntN(200)),
		// Reservations sized by the append rate, between 1-8 offsets
		// and ReservationStep, in half the runs (fixed at ReservationStep
		// in the others); drawn apart from Rng too.
		MinReservationStep: []uint64{1 << 20, uint64(1 + rand.New(rand.NewPCG(seed, 0x7e5e)).IntN(8))}[rand.New(rand.NewPCG(seed, 0x7e5f)).IntN(2)],
		ReaderPoolSize:     2,
		Rand:               &seededReader{rand.New(rand.NewPCG(seed, 0x1d))},
		Pebble: func(o *pebble.Options) {
			// Deterministic: no background compactions, and memtables
			// large enough that the run never rotates its WAL. Without
			// compactions every Open's flush adds a table to L0: never
			// stall writes for it.
			o.DisableAutomaticCompactions = true
			o.MemTableSize = 64 << 20
			o.L0StopWritesThreshold = 1 << 20
			o.L0CompactionThreshold = 1 << 20
		},
		BeforePurgeCommit: func(string, int) {
			if f := w.race; f != nil {
				w.race = nil
				f()
			}
		},
	}
	return w
}

// open starts a process on the disk: opens the engine and builds the
// owners of every topic it has.
func (w *World) open() error {
	opts := w.opts
	opts.FS = w.Disk.FS()
	e, err := engine.Open(opts)
	if err != nil {
		return err
	}
	w.eng, w.meta, w.metaFailed = e, owner.NewEngineMetadata(e), false
	w.topics = map[string]*Topic{}
	defer clear(w.creating)
	if err := w.openRegistries(); err != nil {
		return err
	}
	// The coordinator exists before the owners: each owner asks it who
	// holds its partition.
	if err := w.openGroups(); err != nil {
		return err
	}
	for _, t := range e.Topics() {
		tm := w.models[t.ID()]
		if tm == nil && w.creating[t.Name()] {
			// Its creation failed, but its metadata batch was durable.
			tm = newTopicModel(w, t.Name(), t.ID(), t.Config())
			w.models[t.ID()] = tm
		}
		if tm == nil || tm.name != t.Name() {
			w.violate("the engine has topic %q (%s), which was never created", t.Name(), t.ID())
			continue
		}
		if _, err := w.attach(t, tm); err != nil {
			return err
		}
	}
	return nil
}

// attach builds the owners of an engine topic.
func (w *World) attach(t *engine.Topic, tm *topicModel) (*Topic, error) {
	top := &Topic{Name: t.Name(), ID: t.ID(), m: tm}
	for i := 0; i < t.Partitions(); i++ {
		o, l, err := newOwner(t, i, w.meta, w.groups, tm.parts[i])
		if err != nil {
			return nil, err
		}
		top.Parts = append(top.Parts, &Partition{Topic: top, Index: i, Engine: l.p, Owner: o, log: l, m: tm.parts[i]})
	}
	w.topics[t.Name()] = top
	return top, nil
}

// CreateTopic creates a topic with a configuration drawn from the run.
func (w *World) CreateTopic(name string) (string, error) {
	return w.CreateTopicWith(name, w.drawConfig())
}

// drawConfig draws a topic configuration: small segments (many rolls),
// any durability policy, retention by size, by age or none.
func (w *World) drawConfig() engine.TopicConfig {
	cfg := engine.TopicConfig{
		Partitions:    1 + w.Rng.IntN(2),
		Durability:    []engine.Durability{engine.DurabilityAlways, engine.DurabilityInterval, engine.DurabilityNone}[w.Rng.IntN(3)],
		SyncInterval:  sim50ms,
		SegmentBytes:  4096,
		MaxBatchBytes: 1024,
	}
	switch w.Rng.IntN(3) {
	case 0:
		cfg.RetentionBytes = 8192
	case 1:
		cfg.RetentionAge = sim2s
	}
	return cfg
}

// CreateTopicWith creates a topic with cfg.
func (w *World) CreateTopicWith(name string, cfg engine.TopicConfig) (string, error) {
	t, err := w.eng.CreateTopic(name, cfg)
	if err != nil {
		w.noteErr(err)
		return "", err
	}
	if _, dup := w.models[t.ID()]; dup {
		w.violate("topic %q created with the id %s of an earlier topic", name, t.ID())
	}
	tm := newTopicModel(w, name, t.ID(), t.Config())
	w.models[t.ID()] = tm
	top, err := w.attach(t, tm)
	if err != nil {
		return "", err
	}
	w.checkFresh(top)
	w.syncedAll()
	return fmt.Sprintf("partitions %d, durability %s", t.Config().Partitions, t.Config().Durability), nil
}

// DeleteTopic deletes a live topic; its partitions stay around as zombies.
func (w *World) DeleteTopic(name string) (string, error) {
	top := w.topics[name]
	err := w.eng.DeleteTopic(name)
	if err != nil {
		w.noteErr(err)
		top.m.deleting = true
		return "", err
	}
	top.m.deleted = true
	delete(w.topics, name)
	w.zombies = append(w.zombies, top.Parts...)
	w.syncedAll()
	return "deleted " + top.ID.String()[:8], nil
}

// noteErr notes what an error says about the node's health.
func (w *World) noteErr(err error) {
	if errors.Is(err, engine.ErrMetadataFailed) {
		w.metaFailed = true
	}
}

// Broken reports whether the node needs a restart to serve everything
// again: its metadata store or a partition failed.
func (w *World) Broken() bool {
	if w.metaFailed {
		return true
	}
	for _, t := range w.topics {
		for _, p := range t.Parts {
			if p.Engine.State().Failed != nil {
				return true
			}
		}
	}
	return false
}

// Live returns the live partitions, in name order.
func (w *World) Live() []*Partition {
	var out []*Partition
	for _, name := range sortedKeys(w.topics) {
		out = append(out, w.topics[name].Parts...)
	}
	return out
}

// zombie returns the partition of the last deleted topic named name.
func (w *World) zombie(name string, index int) *Partition {
	for i := len(w.zombies) - 1; i >= 0; i-- {
		if z := w.zombies[i]; z.Topic.Name == name && z.Index == index {
			return z
		}
	}
	return nil
}

// Zombies returns the partitions of deleted topics still held.
func (w *World) Zombies() []*Partition { return w.zombies }

// Names returns the topic names the schedule uses.
func (w *World) Names() []string { return w.names }

// TopicNamed returns the live topic named name, or nil.
func (w *World) TopicNamed(name string) *Topic { return w.topics[name] }

// RestartKind is how a node stops before it starts again.
type RestartKind uint8

const (
	// RestartClean closes the engine cleanly.
	RestartClean RestartKind = iota + 1
	// RestartCrash kills the process: nothing more reaches the disk, but
	// what it wrote stays in the page cache.
	RestartCrash
	// RestartPowerLoss kills the process and loses what was not synced
	// (each unsynced block with some probability), with a garbage sector
	// now and then.
	RestartPowerLoss
)

func (k RestartKind) String() string {
	return map[RestartKind]string{RestartClean: "clean", RestartCrash: "crash", RestartPowerLoss: "power-loss"}[k]
}

// Restart stops the node and starts it again, then checks everything the
// recovery must have kept, removed and fenced.
func (w *World) Restart(kind RestartKind, unsyncedPct, garbagePct int, fates map[string]bool) (string, error) {
	w.Disk.Disarm()
	var closeErr error
	if kind == RestartClean {
		closeErr = w.eng.Close()
		w.Disk.Kill()
	} else {
		w.Disk.Kill()
		_ = w.eng.Close()
	}
	w.cfg.Settle()
	if kind == RestartPowerLoss {
		if err := w.Disk.PowerLossWith(w.Rng, unsyncedPct, garbagePct, fates); err != nil {
			return "", err
		}
	}
	before := map[fence.TopicID]bool{}
	for _, t := range w.topics {
		before[t.ID] = true
	}
	back := w.segmentsBelowStart()
	if w.cfg.States {
		for _, p := range w.Live() {
			dir := partitionDir(p.Topic.ID, p.Index)
			names, _ := w.Disk.Mem().List(dir)
			slices.Sort(names)
			var files []string
			for _, n := range names {
				st, err := w.Disk.Mem().Stat(dir + "/" + n)
				if err == nil {
					files = append(files, fmt.Sprintf("%s(%d)", n, st.Size()))
				}
			}
			w.Tracef("       %s before recovery: %v", p, files)
		}
	}
	// A full disk stays full across a restart, but the metadata store
	// retries a flush that hits it at open in a tight loop (filed
	// separately): until that is fixed, the node restarts with room.
	w.Disk.Free()
	w.zombies = nil
	w.gm.restarted()
	if err := w.open(); err != nil {
		w.violate("open after a %s restart: %v", kind, err)
		return "", err
	}
	w.checkRestart(before)
	out := kind.String()
	if kind == RestartPowerLoss {
		out += fmt.Sprintf(" (%d%% of unsynced data kept)", unsyncedPct)
	}
	if back != "" {
		out += "; before recovery, below the start: " + back
	}
	if closeErr != nil {
		out += "; close: " + errClass(closeErr)
	}
	return out, nil
}

// segmentsBelowStart lists, per live partition, the segment files on the
// disk that lie wholly below the start offset the model knows (what a
// power loss brought back).
func (w *World) segmentsBelowStart() string {
	var parts []string
	for _, name := range sortedKeys(w.topics) {
		for _, p := range w.topics[name].Parts {
			names, _ := w.Disk.Mem().List(partitionDir(p.Topic.ID, p.Index))
			bases := segmentBases(names)
			var below []string
			for i := 0; i+1 < len(bases); i++ {
				if bases[i+1] <= p.m.start {
					below = append(below, fmt.Sprint(bases[i]))
				}
			}
			if len(below) > 0 {
				parts = append(parts, fmt.Sprintf("%s segments %s", p, strings.Join(below, ",")))
			}
		}
	}
	return strings.Join(parts, "; ")
}

// errClass names an error by what it means, for outputs that must not
// depend on paths or wording.
func errClass(err error) string {
	var fe *fence.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, engine.ErrMetadataFailed):
		return "metadata failed"
	case errors.Is(err, engine.ErrPartitionFailed):
		return "partition failed"
	case errors.Is(err, engine.ErrTopicDeleted):
		return "topic deleted"
	case errors.Is(err, engine.ErrNoSpace):
		return "no space"
	case errors.As(err, &fe):
		return "fence: " + fe.Code.String()
	case errors.Is(err, owner.ErrOwnerClosed):
		return "owner closed"
	}
	return err.Error()
}

// shutdown closes the engine at the end of a run.
func (w *World) shutdown() {
	w.Disk.Disarm()
	if w.eng != nil {
		_ = w.eng.Close()
		w.eng = nil
	}
	w.Disk.Kill()
}

// partitionDir returns the directory of partition p of topic id.
func partitionDir(id fence.TopicID, p int) string {
	return fmt.Sprintf("data/topics/%s/%d", id, p)
}

// segmentBases lists the base offsets of the segment files in dir.
func segmentBases(names []string) []uint64 {
	var bases []uint64
	for _, n := range names {
		var b uint64
		if strings.HasSuffix(n, ".log") && len(n) == 24 {
			if _, err := fmt.Sscanf(n, "%020d.log", &b); err == nil {
				bases = append(bases, b)
			}
		}
	}
	slices.Sort(bases)
	return bases
}

// seededReader is an io.Reader of seeded random bytes (topic ids).
type seededReader struct{ r *rand.Rand }

func (s *seededReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(s.r.Uint32())
	}
	return len(p), nil
}
