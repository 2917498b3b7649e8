package transform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
)

// Topic is a live topic as a transform reaches it.
type Topic struct {
	ID fence.TopicID
	// Partitions are the topic's partitions' owners, in partition order.
	Partitions []Partition
	// MaxBatchBytes bounds a batch appended to the topic.
	MaxBatchBytes int
}

// ManagerConfig configures a node's transforms.
type ManagerConfig struct {
	// Meta persists the transforms' specifications.
	Meta owner.Metadata
	// Groups is the coordinator the transforms' members join.
	Groups Groups
	// Producers registers the transforms' producers.
	Producers Producers
	// Plugin runs the plugins; Check, when set, says whether a plugin
	// is a registered transform (Add refuses one that is not).
	Plugin Plugin
	Check  func(plugin string) error
	// Topics resolves a live topic by name.
	Topics func(name string) (Topic, error)
	// Now is the clock of the status' times (default time.Now), Backoff
	// the wait before the failures-th retry of a failed runner or member
	// (default: 100ms doubling up to 10s).
	Now     func() time.Time
	Backoff func(failures int) time.Duration
	Logger  *slog.Logger
}

// Manager runs a node's transforms. Its methods are safe for concurrent
// use.
type Manager struct {
	cfg     ManagerConfig
	log     *slog.Logger
	now     func() time.Time
	backoff func(int) time.Duration

	adminMu sync.Mutex // serializes Add, Remove, Pause, Resume
	mu      sync.Mutex
	specs   map[string]Spec
	running map[string]*running
}

// NewManager returns a manager with nothing running; Start starts the
// persisted transforms.
func NewManager(cfg ManagerConfig) *Manager {
	m := &Manager{cfg: cfg, log: cfg.Logger, now: cfg.Now, backoff: cfg.Backoff,
		specs: map[string]Spec{}, running: map[string]*running{}}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.backoff == nil {
		m.backoff = DefaultBackoff
	}
	return m
}

// DefaultBackoff waits 100ms before the first retry, doubling up to 10s.
func DefaultBackoff(failures int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < failures && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

// Start starts every persisted transform that is not paused. One whose
// topics are gone or were re-created stays in the list with the reason
// in its status.
func (m *Manager) Start(ctx context.Context) error {
	specs, err := loadSpecs(m.cfg.Meta)
	if err != nil {
		return err
	}
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	for _, spec := range specs {
		m.mu.Lock()
		m.specs[spec.Name] = spec
		m.mu.Unlock()
		if !spec.Paused {
			m.start(spec)
		}
	}
	return nil
}

// Add validates spec, resolves its topics (their ids are filled in) and
// its plugin, persists it and starts it. A transform starts at the input
// topic's first record.
func (m *Manager) Add(ctx context.Context, spec Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	in, err := m.cfg.Topics(spec.From)
	if err != nil {
		return fmt.Errorf("%w: input topic %q: %w", ErrConfig, spec.From, err)
	}
	out, err := m.cfg.Topics(spec.To)
	if err != nil {
		return fmt.Errorf("%w: output topic %q: %w", ErrConfig, spec.To, err)
	}
	spec.FromID, spec.ToID = in.ID, out.ID
	if m.cfg.Check != nil {
		if err := m.cfg.Check(spec.Plugin); err != nil {
			return err
		}
	}
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	m.mu.Lock()
	_, exists := m.specs[spec.Name]
	m.mu.Unlock()
	if exists {
		return fmt.Errorf("%w: %s", ErrExists, spec.Name)
	}
	if err := saveSpec(ctx, m.cfg.Meta, spec); err != nil {
		return err
	}
	m.mu.Lock()
	m.specs[spec.Name] = spec
	m.mu.Unlock()
	if !spec.Paused {
		m.start(spec)
	}
	return nil
}

// Remove stops and forgets a transform, and deletes its group's
// committed offsets and state: a transform added again under the name
// starts from the beginning. What it appended stays in the output topic.
func (m *Manager) Remove(ctx context.Context, name string) error {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	spec, err := m.spec(name)
	if err != nil {
		return err
	}
	m.stop(name)
	if err := removeSpec(ctx, m.cfg.Meta, name); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.specs, name)
	m.mu.Unlock()
	if err := m.cfg.Groups.Delete(ctx, spec.Group()); err != nil && !errors.Is(err, group.ErrUnknownGroup) {
		return fmt.Errorf("transform: %s removed, but its group's offsets were not deleted: %w", name, err)
	}
	return nil
}

// Pause stops a transform, durably: it stays stopped across restarts
// until resumed, and its lag grows meanwhile.
func (m *Manager) Pause(ctx context.Context, name string) error { return m.setPaused(ctx, name, true) }

// Resume starts a paused transform again where it stopped.
func (m *Manager) Resume(ctx context.Context, name string) error {
	return m.setPaused(ctx, name, false)
}

func (m *Manager) setPaused(ctx context.Context, name string, paused bool) error {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	spec, err := m.spec(name)
	if err != nil {
		return err
	}
	if spec.Paused == paused {
		return nil
	}
	spec.Paused = paused
	if paused {
		m.stop(name)
	}
	if err := saveSpec(ctx, m.cfg.Meta, spec); err != nil {
		return err
	}
	m.mu.Lock()
	m.specs[name] = spec
	m.mu.Unlock()
	if !paused {
		m.start(spec)
	}
	return nil
}

// List returns every transform, by name.
func (m *Manager) List() []Info {
	m.mu.Lock()
	names := make([]string, 0, len(m.specs))
	for name := range m.specs {
		names = append(names, name)
	}
	m.mu.Unlock()
	slices.Sort(names)
	out := make([]Info, 0, len(names))
	for _, name := range names {
		if info, err := m.Status(name); err == nil {
			out = append(out, info)
		}
	}
	return out
}

// Status returns a transform and its partitions' status.
func (m *Manager) Status(name string) (Info, error) {
	m.mu.Lock()
	spec, ok := m.specs[name]
	rt := m.running[name]
	m.mu.Unlock()
	if !ok {
		return Info{}, fmt.Errorf("%w: %s", ErrNoTransform, name)
	}
	if rt == nil {
		return m.stoppedInfo(spec), nil
	}
	info := rt.info()
	info.Spec = spec
	return info, nil
}

// Close stops every transform and waits for them.
func (m *Manager) Close() {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	m.mu.Lock()
	names := make([]string, 0, len(m.running))
	for name := range m.running {
		names = append(names, name)
	}
	m.mu.Unlock()
	for _, name := range names {
		m.stop(name)
	}
}

func (m *Manager) spec(name string) (Spec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	spec, ok := m.specs[name]
	if !ok {
		return Spec{}, fmt.Errorf("%w: %s", ErrNoTransform, name)
	}
	return spec, nil
}

// topic resolves a transform's topic and checks it is the one the
// transform was added with.
func (m *Manager) topic(name string, id fence.TopicID) (Topic, error) {
	t, err := m.cfg.Topics(name)
	if err != nil {
		return Topic{}, fmt.Errorf("transform: topic %q: %w", name, err)
	}
	if t.ID != id {
		return Topic{}, fmt.Errorf("transform: topic %q was deleted and re-created since the transform was added", name)
	}
	if len(t.Partitions) == 0 {
		return Topic{}, fmt.Errorf("transform: topic %q has no partitions", name)
	}
	return t, nil
}

// start runs spec's member. Called with adminMu held.
func (m *Manager) start(spec Spec) {
	ctx, cancel := context.WithCancel(context.Background())
	rt := &running{spec: spec, cancel: cancel, done: make(chan struct{}),
		stats: map[uint32]*partStats{}, parts: map[uint32]*heldPart{}}
	m.mu.Lock()
	m.running[spec.Name] = rt
	m.mu.Unlock()
	go m.runMember(ctx, rt)
}

// stop stops name's member and runners and waits for them. Called with
// adminMu held.
func (m *Manager) stop(name string) {
	m.mu.Lock()
	rt := m.running[name]
	delete(m.running, name)
	m.mu.Unlock()
	if rt != nil {
		rt.cancel()
		<-rt.done
	}
}

// IsInternalGroup reports whether a group name is a transform's.
func IsInternalGroup(name string) bool { return strings.HasPrefix(name, GroupPrefix) }

// stoppedInfo is the status of a transform that does not run (paused):
// each input partition's committed offset and lag, read from the
// partition, and no counters.
func (m *Manager) stoppedInfo(spec Spec) Info {
	info := Info{Spec: spec}
	in, err := m.topic(spec.From, spec.FromID)
	if err != nil {
		info.Error = err.Error()
		return info
	}
	for p, part := range in.Partitions {
		s := &partStats{now: m.now, in: part}
		s.st.Partition = uint32(p)
		if snap, err := part.InspectState(context.Background(), spec.Group(), owner.StateQuery{Key: keyState}); err == nil {
			s.st.Committed = snap.Next
		}
		info.Partitions = append(info.Partitions, s.status())
	}
	return info
}
