package uplink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
)

// ErrNoUplink: the topic has no uplink. Do not retry.
var ErrNoUplink = errors.New("uplink: the topic has no uplink")

// ManagerConfig configures a node's uplinks.
type ManagerConfig struct {
	// NodeID is part of every transactional id.
	NodeID string
	// Meta persists the uplink specs.
	Meta owner.Metadata
	// Partitions resolves a topic name to its id and its partitions'
	// owners, in partition order.
	Partitions func(topic string) (fence.TopicID, []Source, error)
	// Template supplies the forwarders' tuning (timeouts, backoff, clock,
	// logger); its identity, source and Kafka fields are ignored.
	Template Config
}

// Manager runs the forwarders of a node's uplinks: one per partition of
// every topic with an uplink. Its methods are safe for concurrent use.
type Manager struct {
	cfg ManagerConfig
	log *slog.Logger

	mu      sync.Mutex
	running map[fence.TopicID]*runningUplink
}

type runningUplink struct {
	spec   Spec
	fwds   []*Forwarder
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Info is one uplink with its partitions' status.
type Info struct {
	Spec       Spec
	Partitions []Status
}

// NewManager returns a manager with nothing running; Start starts the
// persisted uplinks.
func NewManager(cfg ManagerConfig) *Manager {
	log := cfg.Template.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, log: log, running: map[fence.TopicID]*runningUplink{}}
}

// Start starts every persisted uplink whose topic still exists under the
// same id. An uplink of a topic that was deleted or re-created since is
// left stopped and logged: it belongs to the old topic id.
func (u *Manager) Start(ctx context.Context) error {
	specs, err := LoadSpecs(u.cfg.Meta)
	if err != nil {
		return err
	}
	for _, spec := range specs {
		id, srcs, err := u.cfg.Partitions(spec.Topic)
		if err != nil || id != spec.TopicID {
			u.log.Warn("uplink: not started: its topic is gone or was re-created since it was added",
				"topic", spec.Topic, "uplink_topic_id", spec.TopicID.String(), "err", err)
			continue
		}
		if err := u.start(ctx, spec, srcs); err != nil {
			return err
		}
	}
	return nil
}

// Add persists an uplink for spec.Topic (its TopicID is filled in) and
// starts it; an existing uplink of the topic is replaced. The forwarders
// resume from the positions committed in Kafka, if any.
func (u *Manager) Add(ctx context.Context, spec Spec) error {
	id, srcs, err := u.cfg.Partitions(spec.Topic)
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
	u.stop(id)
	if err := SaveSpec(ctx, u.cfg.Meta, spec); err != nil {
		return err
	}
	return u.start(context.WithoutCancel(ctx), spec, srcs)
}

// Remove stops and forgets the uplink of topic. Records not yet forwarded
// stay in the topic; retention is no longer held back for them.
func (u *Manager) Remove(ctx context.Context, topic string) error {
	id, ok := u.idOf(topic)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoUplink, topic)
	}
	u.stop(id)
	return RemoveSpec(ctx, u.cfg.Meta, id)
}

// List returns the running uplinks, by topic name.
func (u *Manager) List() []Info {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]Info, 0, len(u.running))
	for _, r := range u.running {
		info := Info{Spec: r.spec}
		for _, f := range r.fwds {
			info.Partitions = append(info.Partitions, f.Status())
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(a.Spec.Topic, b.Spec.Topic) })
	return out
}

// Status returns the uplink of topic.
func (u *Manager) Status(topic string) (Info, error) {
	for _, info := range u.List() {
		if info.Spec.Topic == topic {
			return info, nil
		}
	}
	return Info{}, fmt.Errorf("%w: %s", ErrNoUplink, topic)
}

// RetentionFloor is the lowest offset retention may keep on the
// partition: ok false when nothing holds it back (no uplink, or overflow
// drop-oldest).
func (u *Manager) RetentionFloor(id fence.TopicID, partition uint32) (uint64, bool) {
	u.mu.Lock()
	r := u.running[id]
	u.mu.Unlock()
	if r == nil || int(partition) >= len(r.fwds) {
		return 0, false
	}
	return r.fwds[partition].RetentionFloor()
}

// Now reads the forwarders' clock (what their lag ages are measured by).
func (u *Manager) Now() time.Time {
	if u.cfg.Template.Now != nil {
		return u.cfg.Template.Now()
	}
	return time.Now()
}

// Close stops every forwarder and waits for them.
func (u *Manager) Close() {
	u.mu.Lock()
	ids := make([]fence.TopicID, 0, len(u.running))
	for id := range u.running {
		ids = append(ids, id)
	}
	u.mu.Unlock()
	for _, id := range ids {
		u.stop(id)
	}
}

func (u *Manager) idOf(topic string) (fence.TopicID, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, r := range u.running {
		if r.spec.Topic == topic {
			return id, true
		}
	}
	return fence.TopicID{}, false
}

func (u *Manager) start(ctx context.Context, spec Spec, srcs []Source) error {
	opts, err := spec.KafkaOpts()
	if err != nil {
		return err
	}
	r := &runningUplink{spec: spec}
	for i, src := range srcs {
		cfg := u.cfg.Template
		cfg.NodeID, cfg.TopicID, cfg.Partition, cfg.Topic, cfg.Source = u.cfg.NodeID, spec.TopicID, uint32(i), spec.Topic, src
		cfg.Seeds, cfg.To, cfg.Partitioning, cfg.Overflow = spec.Seeds, spec.To, spec.Partitioning, spec.Overflow
		cfg.KafkaOpts = append(slices.Clone(u.cfg.Template.KafkaOpts), opts...)
		f, err := NewForwarder(cfg)
		if err != nil {
			return err
		}
		r.fwds = append(r.fwds, f)
	}
	ctx, r.cancel = context.WithCancel(ctx)
	for _, f := range r.fwds {
		r.wg.Go(func() {
			if err := f.Run(ctx); err != nil && ctx.Err() == nil {
				u.log.Error("uplink: forwarder stopped", "transactional_id", f.TransactionalID(), "err", err)
			}
		})
	}
	u.mu.Lock()
	u.running[spec.TopicID] = r
	u.mu.Unlock()
	return nil
}

func (u *Manager) stop(id fence.TopicID) {
	u.mu.Lock()
	r := u.running[id]
	delete(u.running, id)
	u.mu.Unlock()
	if r != nil {
		r.cancel()
		r.wg.Wait()
	}
}
