package session

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/downlink"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/node/transform"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/wire"
)

// testNode is a Node of in-memory partitions, without a listener: what
// the handlers reach of a node, and nothing more.
type testNode struct {
	t         *testing.T
	meta      *ownertest.Meta
	tokens    *tokens.Registry
	producers *owner.Producers
	consumers *owner.Sessions
	groups    *group.Groups
	base      context.Context
	parked    chan struct{}
	work      sync.WaitGroup

	mu     sync.Mutex
	topics map[string]*Topic
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	n := &testNode{t: t, meta: ownertest.NewMeta(), topics: map[string]*Topic{}, base: t.Context(), parked: make(chan struct{}, 4)}
	var err error
	if n.tokens, err = tokens.Open(n.meta, n.Now); err != nil {
		t.Fatal(err)
	}
	if n.producers, err = owner.OpenProducers(n.meta); err != nil {
		t.Fatal(err)
	}
	if n.consumers, err = owner.OpenSessions(n.meta); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.work.Wait)
	return n
}

// session is the session of a new token with scopes on topic.
func (n *testNode) session(topic string, scopes wire.Scope) *Session {
	n.t.Helper()
	tok, _, err := n.tokens.Create(n.t.Context(), "test", topic, scopes, 0)
	if err != nil {
		n.t.Fatal(err)
	}
	return New(n, tok, "192.0.2.7")
}

func (n *testNode) Lookup(name string, id [16]byte) (*Topic, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.topics[name]
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return t, nil
}

func (n *testNode) Topics() []*Topic {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*Topic
	for _, t := range n.topics {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Topic) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (n *testNode) CreateTopic(_ context.Context, name string, cfg wire.TopicConfig) (wire.TopicInfo, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.topics[name] != nil {
		return wire.TopicInfo{}, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	id := fence.TopicID{byte(len(n.topics) + 1)}
	t := NewTopic(n.base, name, id, cfg)
	for p := range max(cfg.Partitions, 1) {
		l := ownertest.NewLog(n.meta, fmt.Sprintf("%s/%d", name, p))
		o, err := owner.NewOwner(owner.OwnerConfig{Topic: id, Partition: p, Log: l, Meta: n.meta,
			Producers: n.producers, Sessions: n.consumers, Members: n.groups})
		if err != nil {
			return wire.TopicInfo{}, err
		}
		t.AddPartition(l, o)
	}
	t.Config.Partitions = uint32(len(t.Owners))
	n.topics[name] = t
	return t.Info(), nil
}

func (n *testNode) DeleteTopic(_ context.Context, name string, _ [16]byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.topics[name]
	if t == nil {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	delete(n.topics, name)
	t.Delete()
	return nil
}

func (n *testNode) Tokens() *tokens.Registry       { return n.tokens }
func (n *testNode) CloseToken(*tokens.Token) int   { return 0 }
func (n *testNode) Producers() *owner.Producers    { return n.producers }
func (n *testNode) Consumers() *owner.Sessions     { return n.consumers }
func (n *testNode) Groups() *group.Groups          { return n.groups }
func (n *testNode) GroupDeleted(string)            {}
func (n *testNode) Uplinks() *uplink.Manager       { return nil }
func (n *testNode) Downlinks() *downlink.Manager   { return nil }
func (n *testNode) Transforms() *transform.Manager { return nil }
func (n *testNode) Plugins() *pluginreg.Registry   { return nil }
func (n *testNode) Draining() context.Context      { return n.base }
func (n *testNode) Go(f func())                    { n.work.Go(f) }
func (n *testNode) Logger() *slog.Logger           { return slog.New(slog.DiscardHandler) }
func (n *testNode) Now() time.Time                 { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
func (n *testNode) Unpark()                        { <-n.parked }
func (n *testNode) Limits() Limits {
	return Limits{MaxPollWait: time.Minute, MaxParkedPolls: cap(n.parked), MaxPollBytes: 8 << 20, PollBytes: 1 << 20}
}

func (n *testNode) Park(wait time.Duration) bool {
	if wait <= 0 {
		return false
	}
	select {
	case n.parked <- struct{}{}:
		return true
	default:
		return false
	}
}
