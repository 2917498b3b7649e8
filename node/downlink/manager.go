package downlink

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
)

// ManagerConfig configures a node's downlinks.
type ManagerConfig struct {
	// Meta persists the specs and the checkpoints.
	Meta      owner.Metadata
	Producers Registry
	// Partitions resolves a local topic name to its id and its
	// partitions' owners, in partition order.
	Partitions func(topic string) (fence.TopicID, []Target, error)
	// Template supplies the downlinks' tuning (batch bounds, backoff,
	// clock, logger, extra Kafka options); its Spec, Targets, Producers
	// and Meta are ignored.
	Template Config
}

// Manager runs a node's downlinks: one per local topic at most. Its
// methods are safe for concurrent use.
type Manager struct {
	cfg ManagerConfig
	log *slog.Logger

	mu      sync.Mutex
	running map[fence.TopicID]*running
}

type running struct {
	spec   Spec
	dl     *Downlink
	cancel context.CancelFunc
	done   chan struct{}
}

// Info is one downlink with its status.
type Info struct {
	Spec   Spec
	Status Status
}

// NewManager returns a manager with nothing running; Start starts the
// persisted downlinks.
func NewManager(cfg ManagerConfig) *Manager {
	log := cfg.Template.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, log: log, running: map[fence.TopicID]*running{}}
}

// Start starts every persisted downlink whose local topic still exists
// under the same id; one of a deleted or re-created topic is logged and
// left stopped.
func (m *Manager) Start(ctx context.Context) error {
	specs, err := LoadSpecs(m.cfg.Meta)
	if err != nil {
		return err
	}
	for _, spec := range specs {
		id, targets, err := m.cfg.Partitions(spec.Topic)
		if err != nil || id != spec.TopicID {
			m.log.Warn("downlink: not started: its topic is gone or was re-created since it was added",
				"topic", spec.Topic, "downlink_topic_id", spec.TopicID.String(), "err", err)
			continue
		}
		if err := m.start(ctx, spec, targets); err != nil {
			return err
		}
	}
	return nil
}

// Add persists a downlink into spec.Topic (its TopicID is filled in) and
// starts it; an existing downlink of the topic is stopped and replaced.
// A downlink from the same Kafka topic resumes where the local topic's
// records say the previous one stopped; from another Kafka topic, it
// starts at that topic's oldest record.
func (m *Manager) Add(ctx context.Context, spec Spec) error {
	id, targets, err := m.cfg.Partitions(spec.Topic)
	if err != nil {
		return err
	}
	spec.TopicID = id
	if err := spec.Validate(); err != nil {
		return err
	}
	if _, err := spec.KafkaOpts(); err != nil {
		return err
	}
	m.stop(id)
	if err := SaveSpec(ctx, m.cfg.Meta, spec); err != nil {
		return err
	}
	return m.start(context.WithoutCancel(ctx), spec, targets)
}

// Remove stops and forgets the downlink of topic. What it appended stays.
func (m *Manager) Remove(ctx context.Context, topic string) error {
	id, ok := m.idOf(topic)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoDownlink, topic)
	}
	m.stop(id)
	return RemoveSpec(ctx, m.cfg.Meta, id)
}

// List returns the running downlinks, by local topic name.
func (m *Manager) List() []Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Info, 0, len(m.running))
	for _, r := range m.running {
		out = append(out, Info{Spec: r.spec, Status: r.dl.Status()})
	}
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(a.Spec.Topic, b.Spec.Topic) })
	return out
}

// Status returns the downlink of topic.
func (m *Manager) Status(topic string) (Info, error) {
	for _, info := range m.List() {
		if info.Spec.Topic == topic {
			return info, nil
		}
	}
	return Info{}, fmt.Errorf("%w: %s", ErrNoDownlink, topic)
}

// Close stops every downlink and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	ids := make([]fence.TopicID, 0, len(m.running))
	for id := range m.running {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.stop(id)
	}
}

func (m *Manager) idOf(topic string) (fence.TopicID, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, r := range m.running {
		if r.spec.Topic == topic {
			return id, true
		}
	}
	return fence.TopicID{}, false
}

func (m *Manager) start(ctx context.Context, spec Spec, targets []Target) error {
	cfg := m.cfg.Template
	cfg.Spec, cfg.Targets, cfg.Producers, cfg.Meta = spec, targets, m.cfg.Producers, m.cfg.Meta
	dl, err := New(cfg)
	if err != nil {
		return err
	}
	r := &running{spec: spec, dl: dl, done: make(chan struct{})}
	ctx, r.cancel = context.WithCancel(ctx)
	go func() {
		defer close(r.done)
		if err := dl.Run(ctx); err != nil && ctx.Err() == nil {
			m.log.Error("downlink: stopped", "topic", spec.Topic, "from", spec.From, "err", err)
		}
	}()
	m.mu.Lock()
	m.running[spec.TopicID] = r
	m.mu.Unlock()
	return nil
}

func (m *Manager) stop(id fence.TopicID) {
	m.mu.Lock()
	r := m.running[id]
	delete(m.running, id)
	m.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}
