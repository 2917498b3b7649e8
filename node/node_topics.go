package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/wire"
)

// topic is a live topic: its identity, configuration, logs and owners.
type topic struct {
	name   string
	id     fence.TopicID
	cfg    wire.TopicConfig
	logs   []owner.PartitionLog
	owners []*owner.Owner
	// gone ends when the topic is deleted: parked polls on it wake.
	gone   context.Context
	delete context.CancelFunc
}

func (t *topic) deleted() bool { return t.gone.Err() != nil }

func (t *topic) info() wire.TopicInfo {
	return wire.TopicInfo{Name: t.name, ID: t.id, Config: t.cfg}
}

// owner returns the owner of partition p.
func (t *topic) owner(p uint32) (*owner.Owner, error) {
	if uint64(p) >= uint64(len(t.owners)) {
		return nil, fmt.Errorf("%w: %s has %d partitions, no partition %d", ErrUnknownPartition, t.name, len(t.owners), p)
	}
	return t.owners[p], nil
}

// state describes partition p as replies carry it.
func (t *topic) state(p uint32) wire.PartitionState {
	if _, err := t.owner(p); err != nil {
		s, msg := StatusOf(err)
		return wire.PartitionState{Partition: p, Status: s, Message: msg}
	}
	st := t.logs[p].State()
	ps := wire.PartitionState{
		Partition: p, StartOffset: st.LogStart, HighWatermark: st.HighWatermark, History: uint64(st.History),
	}
	if st.Failed != nil {
		ps.Status, ps.Message = StatusOf(fmt.Errorf("%w: %w", ErrPartitionFailed, st.Failed))
	}
	return ps
}

// newTopic builds the owners of a stored topic.
func (n *Node) newTopic(st StoredTopic) (*topic, error) {
	t := &topic{name: st.Name, id: st.ID, cfg: st.Config}
	t.gone, t.delete = context.WithCancel(n.base)
	t.cfg.Partitions = uint32(len(st.Partitions))
	for i, l := range st.Partitions {
		o, err := owner.NewOwner(owner.OwnerConfig{
			Topic: st.ID, Partition: uint32(i), Log: l, Meta: n.meta,
			Producers: n.producers, Sessions: n.sessions, Members: n.groups,
			AppendTime:     st.Config.Timestamps == wire.TimestampModeAppend,
			RetentionFloor: func() (uint64, bool) { return n.retentionFloor(st.ID, uint32(i)) },
		})
		if err != nil {
			t.delete()
			return nil, fmt.Errorf("node: topic %s: %w", st.Name, err)
		}
		t.logs = append(t.logs, l)
		t.owners = append(t.owners, o)
	}
	return t, nil
}

// lookup returns the live topic name. A non-zero id must be the topic's:
// otherwise the name now belongs to another creation of the topic.
func (n *Node) lookup(name string, id [16]byte) (*topic, error) {
	n.topicsMu.RLock()
	t := n.topics[name]
	n.topicsMu.RUnlock()
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	if fence.TopicID(id) != (fence.TopicID{}) && fence.TopicID(id) != t.id {
		return nil, fence.FromCode(fence.CodeTopicRecreated,
			fmt.Sprintf("topic %q is now topic id %s, not %s", name, t.id, fence.TopicID(id)))
	}
	return t, nil
}

// topicList returns the live topics by name.
func (n *Node) topicList() []*topic {
	n.topicsMu.RLock()
	out := make([]*topic, 0, len(n.topics))
	for _, t := range n.topics {
		out = append(out, t)
	}
	n.topicsMu.RUnlock()
	slices.SortFunc(out, func(a, b *topic) int { return strings.Compare(a.name, b.name) })
	return out
}

// maxPartitions bounds a topic's partitions.
const maxPartitions = 1 << 16

// CreateTopic creates a topic and its owners. A zero field of cfg takes
// the default (PROTOCOL.md), except the retention limits, where zero keeps
// forever.
func (n *Node) CreateTopic(ctx context.Context, name string, cfg wire.TopicConfig) (wire.TopicInfo, error) {
	if err := wire.CheckTopicName(name); err != nil {
		return wire.TopicInfo{}, err
	}
	if cfg.Partitions > maxPartitions {
		return wire.TopicInfo{}, invalidArgument(fmt.Sprintf("%d partitions exceed the limit of %d", cfg.Partitions, maxPartitions))
	}
	n.adminMu.Lock()
	defer n.adminMu.Unlock()
	if n.closing.Load() {
		return wire.TopicInfo{}, ErrShuttingDown
	}
	n.topicsMu.RLock()
	_, exists := n.topics[name]
	n.topicsMu.RUnlock()
	if exists {
		return wire.TopicInfo{}, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	st, err := n.storage.CreateTopic(name, cfg)
	if err != nil {
		return wire.TopicInfo{}, err
	}
	t, err := n.newTopic(st)
	if err != nil {
		return wire.TopicInfo{}, err
	}
	n.topicsMu.Lock()
	n.topics[name] = t
	n.topicsMu.Unlock()
	// The storage engine logs the creation (with the durability); a line
	// here would say it twice.
	return t.info(), nil
}

// DeleteTopic deletes a topic: its records, offsets, producer state. A
// non-zero id deletes only that creation of the name. Requests in flight
// on the topic fail (ErrTopicDeleted); parked polls on it wake.
func (n *Node) DeleteTopic(ctx context.Context, name string, id [16]byte) error {
	n.adminMu.Lock()
	defer n.adminMu.Unlock()
	t, err := n.lookup(name, id)
	if err != nil {
		return err
	}
	if err := n.uplinks.Remove(ctx, name); err != nil && !errors.Is(err, uplink.ErrNoUplink) {
		return err
	}
	n.topicsMu.Lock()
	delete(n.topics, name)
	n.topicsMu.Unlock()
	t.delete()
	// The owners refuse everything from now on, before the logs go. An
	// append still in progress when ctx ends is refused by the log.
	for _, o := range t.owners {
		_ = o.CloseDeleted(ctx)
	}
	n.kafkaForget(name, "")
	if err := n.storage.DeleteTopic(name, t.id); err != nil {
		return err
	}
	return nil // logged by the storage engine, as the creation
}
