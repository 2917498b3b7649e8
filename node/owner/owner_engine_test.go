package owner_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// engineBackend runs the owner scenarios on the real storage engine, on an
// in-memory crashable file system, with the tail cache off so that every
// poll reads its segment file. A read is suspended at that file read
// through the engine's BeforeRead hook.
type engineBackend struct {
	t  testing.TB
	fs *vfs.MemFS
	e  *engine.Engine
	p  *engine.Partition

	mu   sync.Mutex
	gate *ownertest.ReadGate
}

const engineTopic = "events"

func newEngineBackend(t testing.TB) scenarioBackend {
	b := &engineBackend{t: t, fs: vfs.NewCrashableMem()}
	b.open(true)
	return b
}

func (b *engineBackend) open(create bool) {
	t := b.t
	e, err := engine.Open(engine.Options{
		FS: b.fs, Dir: "data",
		Now:            func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) },
		TailCacheBytes: -1,
		ReservedBytes:  -1,
		BeforeRead:     b.beforeRead,
	})
	if err != nil {
		t.Fatal(err)
	}
	var topic *engine.Topic
	if create {
		topic, err = e.CreateTopic(engineTopic, engine.TopicConfig{Partitions: 1, Durability: engine.DurabilityAlways})
	} else {
		topic, err = e.Topic(engineTopic)
	}
	if err != nil {
		t.Fatal(err)
	}
	if b.p, err = topic.Partition(0); err != nil {
		t.Fatal(err)
	}
	b.e = e
}

func (b *engineBackend) beforeRead(ctx context.Context, r engine.ReadInfo) error {
	b.mu.Lock()
	g := b.gate
	b.gate = nil
	b.mu.Unlock()
	if g == nil {
		return nil
	}
	if !strings.HasSuffix(r.File, ".log") {
		b.t.Errorf("suspended a read of %s, want a segment file", r.File)
	}
	return g.Wait(ctx)
}

func (b *engineBackend) topic() fence.TopicID    { return b.p.Topic().ID() }
func (b *engineBackend) log() owner.PartitionLog { return owner.NewEngineLog(b.p) }
func (b *engineBackend) meta() owner.Metadata {
	return owner.NewEngineMetadata(b.e)
}

func (b *engineBackend) suspendNextRead() *ownertest.ReadGate {
	g := ownertest.NewReadGate()
	b.mu.Lock()
	b.gate = g
	b.mu.Unlock()
	return g
}

// persist: under durability "always" every acknowledged append is already
// fsynced, and with the tail cache off every read goes to the file.
func (b *engineBackend) persist(t testing.TB) {
	st := b.p.State()
	if st.HighWatermark > 0 {
		if err := b.p.WaitDurable(context.Background(), st.HighWatermark-1); err != nil {
			t.Fatal(err)
		}
	}
}

// restart crashes the node: only what was synced survives.
func (b *engineBackend) restart(t testing.TB) {
	crashed := b.fs.CrashClone(vfs.CrashCloneCfg{})
	b.close()
	b.fs = crashed
	b.open(false)
}

func (b *engineBackend) lose(t testing.TB, _, _ uint64) {
	t.Fatal("the engine backend cannot force a lossy recovery deterministically")
}

func (b *engineBackend) retain(t testing.TB, _ uint64) {
	t.Fatal("the engine backend does not run retention scenarios")
}

func (b *engineBackend) close() {
	if err := b.e.Close(); err != nil {
		b.t.Errorf("close: %v", err)
	}
}

// TestOwnerScenariosEngine runs the owner scenarios on the real engine.
// Those that need a lossy recovery or retention at a chosen offset run on
// the in-memory log only.
func TestOwnerScenariosEngine(t *testing.T) {
	runScenarios(t, newEngineBackend, func(path string) bool {
		return strings.HasSuffix(path, "lossy_recovery") || strings.HasSuffix(path, "long_poll_retention")
	})
}
