package group

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/transport/wire"
)

// groupWorld is a coordinator over in-memory topics, with a manual clock:
// what the group tests drive synchronously.
type groupWorld struct {
	t      testing.TB
	meta   *ownertest.Meta
	clock  *manualClock
	groups *Groups
	topics *testTopics
}

// manualClock is a clock that moves only when told.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testTopics implements GroupTopics over memLogs and real owners.
type testTopics struct {
	mu     sync.Mutex
	topics map[string]*testTopic
	// wrap, when set, wraps every owner the coordinator drives (the
	// linearizability test records Assign steps through it).
	wrap func(topic string, partition int, o *owner.Owner) PartitionAssigner
}

type testTopic struct {
	id     fence.TopicID
	logs   []*ownertest.Log
	owners []*owner.Owner
}

func (tt *testTopics) GroupTopic(name string) (fence.TopicID, []PartitionAssigner, bool) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t := tt.topics[name]
	if t == nil {
		return fence.TopicID{}, nil, false
	}
	parts := make([]PartitionAssigner, len(t.owners))
	for i, o := range t.owners {
		parts[i] = o
		if tt.wrap != nil {
			parts[i] = tt.wrap(name, i, o)
		}
	}
	return t.id, parts, true
}

func (tt *testTopics) GroupTopicNames() []string {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return sortedKeys(tt.topics)
}

func (tt *testTopics) GroupOffset(topic string, partition uint32, group string) wire.GroupOffset {
	tt.mu.Lock()
	t := tt.topics[topic]
	tt.mu.Unlock()
	if t == nil || int(partition) >= len(t.logs) {
		return wire.GroupOffset{Topic: topic, Partition: partition, Status: wire.StatusUnknownPartition}
	}
	o, err := ResolveOffset(t.id, partition, t.logs[partition], group)
	if err != nil {
		o.Status, o.Message = wire.StatusOf(err), err.Error()
	}
	o.Topic = topic
	return o
}

func (tt *testTopics) topic(name string) *testTopic {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.topics[name]
}

func newGroupWorld(t testing.TB) *groupWorld {
	w := &groupWorld{
		t: t, meta: ownertest.NewMeta(),
		clock:  &manualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		topics: &testTopics{topics: map[string]*testTopic{}},
	}
	w.openGroups()
	return w
}

func (w *groupWorld) openGroups() {
	n := 0
	g, err := OpenGroups(GroupsConfig{
		Meta: w.meta, Topics: w.topics, Now: w.clock.Now,
		HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second, RebalanceTimeout: 30 * time.Second,
		EpochBlock: 16,
		NewMemberID: func() string {
			n++
			return fmt.Sprintf("m%d", n)
		},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.groups = g
}

// createTopic adds a topic whose owners answer to the coordinator.
func (w *groupWorld) createTopic(name string, partitions int) *testTopic {
	var id fence.TopicID
	copy(id[:], fmt.Sprintf("%-16s", name))
	id[15] ^= byte(len(w.topics.topics) + 1)
	t := &testTopic{id: id}
	for i := range partitions {
		l := ownertest.NewLog(w.meta, fmt.Sprintf("%s/%d", name, i))
		t.logs = append(t.logs, l)
		t.owners = append(t.owners, w.newOwner(id, uint32(i), l))
	}
	w.topics.mu.Lock()
	w.topics.topics[name] = t
	w.topics.mu.Unlock()
	return t
}

func (w *groupWorld) newOwner(id fence.TopicID, partition uint32, l *ownertest.Log) *owner.Owner {
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: id, Partition: partition, Log: l, Meta: w.meta, Members: groupsMembers{w}})
	if err != nil {
		w.t.Fatal(err)
	}
	return o
}

// groupsMembers answers for whatever coordinator the world has now (it is
// replaced on restart).
type groupsMembers struct{ w *groupWorld }

func (m groupsMembers) Member(group, member string) (bool, fence.MemberEpoch) {
	return m.w.groups.Member(group, member)
}

// restart models a node restart: metadata keeps what was synced, logs
// keep their records, owners and the coordinator start afresh.
func (w *groupWorld) restart() {
	w.meta = w.meta.Restart()
	for _, t := range w.topics.topics {
		for i, l := range t.logs {
			l.SetMeta(w.meta)
			t.owners[i] = w.newOwner(t.id, uint32(i), l)
		}
	}
	w.openGroups()
}

// produce appends one batch per value, so that a poll of one batch
// delivers one record.
func (w *groupWorld) produce(topic string, partition int, values ...string) {
	o := w.topics.topic(topic).owners[partition]
	for _, v := range values {
		if _, err := o.Produce(context.Background(), ownertest.Batch(w.t, v)); err != nil {
			w.t.Fatal(err)
		}
	}
}

// committed returns the group's resolved committed offset on a partition.
func (w *groupWorld) committed(group, topic string, partition int) (uint64, bool) {
	o := w.topics.GroupOffset(topic, uint32(partition), group)
	return o.Resolved, o.HasOffset
}

// validTokens counts, for one partition, the tokens among toks that the
// owner would accept now (CheckCurrent against its facts of each token's
// member).
func validTokens(o *owner.Owner, group string, toks map[string]fence.Token) []string {
	var valid []string
	for member, tok := range toks {
		if tok.IsZero() {
			continue
		}
		if o.CheckToken(owner.Consumer{Name: group, Member: member}, tok) == nil {
			valid = append(valid, member)
		}
	}
	return valid
}
