package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/downlink"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/node/transform"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/wire"
)

// topic is a live topic: its identity, configuration, logs and owners.
type topic = session.Topic

// newTopic builds the owners of a stored topic.
func (n *Node) newTopic(st StoredTopic) (*topic, error) {
	cfg := st.Config
	cfg.Partitions = uint32(len(st.Partitions))
	t := session.NewTopic(n.base, st.Name, st.ID, cfg)
	for i, l := range st.Partitions {
		o, err := owner.NewOwner(owner.OwnerConfig{
			Topic: st.ID, Partition: uint32(i), Log: l, Meta: n.meta,
			Producers: n.producers, Sessions: n.sessions, Members: n.groups,
			AppendTime:     st.Config.Timestamps == wire.TimestampModeAppend,
			RetentionFloor: func() (uint64, bool) { return n.retentionFloor(st.ID, uint32(i)) },
		})
		if err != nil {
			t.Delete()
			return nil, fmt.Errorf("node: topic %s: %w", st.Name, err)
		}
		t.AddPartition(l, o)
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
	if fence.TopicID(id) != (fence.TopicID{}) && fence.TopicID(id) != t.ID {
		return nil, fence.FromCode(fence.CodeTopicRecreated,
			fmt.Sprintf("topic %q is now topic id %s, not %s", name, t.ID, fence.TopicID(id)))
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
	slices.SortFunc(out, func(a, b *topic) int { return strings.Compare(a.Name, b.Name) })
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
	return t.Info(), nil
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
	if err := n.downlinks.Remove(ctx, name); err != nil && !errors.Is(err, downlink.ErrNoDownlink) {
		return err
	}
	n.topicsMu.Lock()
	delete(n.topics, name)
	n.topicsMu.Unlock()
	t.Delete()
	// The owners refuse everything from now on, before the logs go. An
	// append still in progress when ctx ends is refused by the log.
	for _, o := range t.Owners {
		_ = o.CloseDeleted(ctx)
	}
	n.kafkaForget(name, "")
	if err := n.storage.DeleteTopic(name, t.ID); err != nil {
		return err
	}
	return nil // logged by the storage engine, as the creation
}

// park takes one of the node's places for a poll that may wait; false
// when the poll would not wait or every place is taken. A place taken is
// given back with unpark.
func (n *Node) park(wait time.Duration) bool {
	if wait <= 0 {
		return false
	}
	select {
	case n.parked <- struct{}{}:
		if n.onPark != nil {
			n.onPark()
		}
		return true
	default:
		return false
	}
}

// unpark gives a parking place back.
func (n *Node) unpark() { <-n.parked }

// nodeGroupTopics is the node's live topics as the coordinator sees them.
type nodeGroupTopics struct{ n *Node }

// groupTopics returns the node's topics for OpenGroups.
func (n *Node) groupTopics() group.GroupTopics { return nodeGroupTopics{n} }

func (t nodeGroupTopics) GroupTopic(name string) (fence.TopicID, []group.PartitionAssigner, bool) {
	tp, err := t.n.lookup(name, [16]byte{})
	if err != nil || tp.Deleted() {
		return fence.TopicID{}, nil, false
	}
	parts := make([]group.PartitionAssigner, len(tp.Owners))
	for i, o := range tp.Owners {
		parts[i] = o
	}
	return tp.ID, parts, true
}

func (t nodeGroupTopics) GroupTopicNames() []string {
	ts := t.n.topicList()
	out := make([]string, 0, len(ts))
	for _, tp := range ts {
		if !tp.Deleted() {
			out = append(out, tp.Name)
		}
	}
	return out
}

// Groups returns the node's consumer-group coordinator, for the status
// page and metrics.
func (n *Node) Groups() *group.Groups { return n.groups }

var keyNodeID = []byte("node/id")

// LoadOrCreateNodeID returns the node's id, creating and persisting a
// random one on first use. It lives in the node's metadata, so a restored
// backup of the node has the same id — and its uplinks the same
// transactional ids, which is what fences the original (or the backup).
func LoadOrCreateNodeID(ctx context.Context, meta owner.Metadata) (string, error) {
	v, ok, err := meta.Get(keyNodeID)
	if err != nil {
		return "", err
	}
	if ok && len(v) > 0 {
		return string(v), nil
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b[:])
	t, err := meta.Put(keyNodeID, []byte(id))
	if err != nil {
		return "", err
	}
	return id, meta.Sync(ctx, t)
}

// transformTopic resolves a live topic for the transforms.
func (n *Node) transformTopic(name string) (transform.Topic, error) {
	t, err := n.lookup(name, [16]byte{})
	if err != nil {
		return transform.Topic{}, err
	}
	out := transform.Topic{ID: t.ID, MaxBatchBytes: int(t.Config.MaxBatchBytes)}
	for _, o := range t.Owners {
		out.Partitions = append(out.Partitions, o)
	}
	return out, nil
}

// uplinkPartitions resolves a live topic for Uplinks.
func (n *Node) uplinkPartitions(name string) (fence.TopicID, []uplink.Source, error) {
	t, err := n.lookup(name, [16]byte{})
	if err != nil {
		return fence.TopicID{}, nil, err
	}
	srcs := make([]uplink.Source, len(t.Owners))
	for i, o := range t.Owners {
		srcs[i] = o
	}
	return t.ID, srcs, nil
}

// downlinkPartitions resolves a live topic for Downlinks.
func (n *Node) downlinkPartitions(name string) (fence.TopicID, []downlink.Target, error) {
	t, err := n.lookup(name, [16]byte{})
	if err != nil {
		return fence.TopicID{}, nil, err
	}
	targets := make([]downlink.Target, len(t.Owners))
	for i, o := range t.Owners {
		targets[i] = o
	}
	return t.ID, targets, nil
}

// PluginsDir is the directory of the data directory holding plugin
// modules, and PluginsCacheDir the compilation cache (node/pluginreg).
const (
	PluginsDir      = pluginreg.Dir
	PluginsCacheDir = pluginreg.CacheDir
)

// WaitPluginsLoaded waits until the plugins registered when the node
// started are loaded (or failed to load, which is logged). The node
// serves meanwhile; a poll naming a plugin not loaded yet waits for it
// within its max wait.
func (n *Node) WaitPluginsLoaded(ctx context.Context) error { return n.plugins.WaitLoaded(ctx) }

// Plugins returns what the status page and /metrics read of the node's
// plugins (HTTPServer.AttachPlugins).
func (n *Node) Plugins() ops.PluginLister { return pluginStatuses{n.plugins} }

// pluginStatuses is ops.PluginLister over the registry's list.
type pluginStatuses struct{ reg *pluginreg.Registry }

func (p pluginStatuses) PluginStatuses() []ops.PluginStatus {
	infos := p.reg.List()
	out := make([]ops.PluginStatus, 0, len(infos))
	for _, i := range infos {
		out = append(out, ops.PluginStatus{
			Name: i.Name, Kind: i.Kind.String(), Calls: i.Calls, Failures: i.Failures,
			Timeouts: i.Timeouts, Traps: i.Traps, Strikes: i.Strikes, State: i.State.String(),
		})
	}
	return out
}
func (t nodeGroupTopics) GroupOffset(topic string, partition uint32, group string) wire.GroupOffset {
	return session.GroupOffset((*sessionNode)(t.n), topic, partition, group)
}

// sessionNode is the node as its sessions reach it (session.Node).
type sessionNode Node

func (s *sessionNode) node() *Node { return (*Node)(s) }

func (s *sessionNode) Lookup(name string, id [16]byte) (*session.Topic, error) {
	return s.node().lookup(name, id)
}
func (s *sessionNode) Topics() []*session.Topic { return s.node().topicList() }
func (s *sessionNode) CreateTopic(ctx context.Context, name string, cfg wire.TopicConfig) (wire.TopicInfo, error) {
	return s.node().CreateTopic(ctx, name, cfg)
}
func (s *sessionNode) DeleteTopic(ctx context.Context, name string, id [16]byte) error {
	return s.node().DeleteTopic(ctx, name, id)
}
func (s *sessionNode) Tokens() *tokens.Registry  { return s.tokens }
func (s *sessionNode) GroupDeleted(group string) { s.node().kafkaForget("", group) }
func (s *sessionNode) CloseToken(tok *tokens.Token) int {
	return s.ln.CloseToken(tok.Info.ID, "token revoked") + s.node().closeKafkaToken(tok)
}
func (s *sessionNode) Producers() *owner.Producers    { return s.producers }
func (s *sessionNode) Consumers() *owner.Sessions     { return s.sessions }
func (s *sessionNode) Groups() *group.Groups          { return s.groups }
func (s *sessionNode) Uplinks() *uplink.Manager       { return s.uplinks }
func (s *sessionNode) Downlinks() *downlink.Manager   { return s.downlinks }
func (s *sessionNode) Transforms() *transform.Manager { return s.transforms }
func (s *sessionNode) Plugins() *pluginreg.Registry   { return s.plugins }
func (s *sessionNode) Park(wait time.Duration) bool   { return s.node().park(wait) }
func (s *sessionNode) Unpark()                        { s.node().unpark() }
func (s *sessionNode) Draining() context.Context      { return s.drain }
func (s *sessionNode) Go(f func())                    { s.work.Go(f) }
func (s *sessionNode) Logger() *slog.Logger           { return s.log }
func (s *sessionNode) Now() time.Time                 { return s.cfg.Now() }
func (s *sessionNode) Limits() session.Limits {
	return session.Limits{
		MaxPollWait: s.cfg.MaxPollWait, MaxParkedPolls: s.cfg.MaxParkedPolls,
		MaxPollBytes: s.cfg.MaxPollBytes, PollBytes: DefaultPollBytes,
	}
}

// Errors of the node's request handling (session's, named here too).
// Each maps to one wire status (StatusOf).
var (
	ErrUnknownTopic     = session.ErrUnknownTopic
	ErrTopicExists      = session.ErrTopicExists
	ErrTopicDeleted     = session.ErrTopicDeleted
	ErrUnknownPartition = session.ErrUnknownPartition
	ErrUnauthenticated  = session.ErrUnauthenticated
	ErrForbidden        = session.ErrForbidden
	ErrUnknownToken     = session.ErrUnknownToken
	ErrShuttingDown     = session.ErrShuttingDown
	ErrBusy             = session.ErrBusy
	ErrNoSpace          = session.ErrNoSpace
	ErrPartitionFailed  = session.ErrPartitionFailed
	ErrInvalidBatch     = session.ErrInvalidBatch
	ErrInvalidArgument  = session.ErrInvalidArgument
)

// StatusOf maps an error of a request to the one status its reply
// carries, and the message for people (session.StatusOf).
func StatusOf(err error) (wire.Status, string) { return session.StatusOf(err) }

// invalidArgument is a request value the node refuses.
func invalidArgument(msg string) error {
	return &wire.Error{Status: wire.StatusInvalidArgument, Message: msg}
}
