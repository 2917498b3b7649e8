package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// The group coordinator, server-driven in the spirit of Kafka's KIP-848.
//
// Members join, heartbeat and leave; the coordinator computes each
// group's target assignment, and members reconcile toward it. There is
// one monotonic group epoch per group, bumped whenever the target
// changes. A member's epoch is the group epoch of the target it last
// reconciled with; the assignment epoch of a partition is the member
// epoch at which the member received it (a regain gets a new, higher
// one). A member whose target drops a partition keeps its epoch and the
// partition until it confirms, in a heartbeat, that it gave the partition
// up — until then it may still commit it — or until its session (or
// rebalance timeout) expires; only then does the partition move.
//
// Every change of a partition's holder is installed as a step of the
// partition's owner (PartitionAssigner.Assign), so a commit and the move
// of its partition are ordered. The owner checks commits and polls with
// fence's member rule against what the coordinator answers through
// Member (Members) and what Assign installed.
//
// The core runs no goroutine and reads no clock of its own: every
// operation is one synchronous step at Config.Now, and Expire runs the
// timeouts; Run is a small loop around Expire for the node. Group epochs
// are persisted ahead of use (a reservation ceiling in metadata, synced
// outside the lock), so no epoch repeats after a restart. Membership is
// not restored: after a restart members join again, under epochs above
// every epoch handed out before, so their earlier tokens are stale.

// Coordinator defaults.
const (
	DefaultHeartbeatInterval = time.Second
	DefaultSessionTimeout    = 10 * time.Second
	MinSessionTimeout        = time.Second
	MaxSessionTimeout        = 5 * time.Minute
	DefaultRebalanceTimeout  = 30 * time.Second
	// DefaultEpochBlock is how many group epochs one persisted
	// reservation covers.
	DefaultEpochBlock = 1024
)

// PartitionAssigner is a partition owner as the coordinator drives it;
// *owner.Owner is one. Both methods are owner steps.
type PartitionAssigner interface {
	Assign(group, member string, assignmentEpoch fence.MemberEpoch)
	Unassign(group string)
}

// GroupTopics is what the coordinator knows of topics.
type GroupTopics interface {
	// GroupTopic returns the live topic called name: its id and its
	// partitions' owners by index. ok is false when there is none.
	GroupTopic(name string) (id fence.TopicID, partitions []PartitionAssigner, ok bool)
	// GroupOffset describes a group's progress on a partition of the
	// live topic (for DescribeGroup).
	GroupOffset(topic string, partition uint32, group string) wire.GroupOffset
}

// GroupTopicLister is GroupTopics that can also list every live topic by
// name. A deleted group's offsets are removed from every partition of
// every topic it lists; GroupTopics without it, from the topics of the
// group's subscription only.
type GroupTopicLister interface {
	GroupTopicNames() []string
}

// GroupsConfig configures the coordinator. Zero durations take the
// defaults above.
type GroupsConfig struct {
	Meta   owner.Metadata
	Topics GroupTopics
	// Now is the coordinator's clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// HeartbeatInterval is what members are told to heartbeat at.
	HeartbeatInterval time.Duration
	// SessionTimeout is the default session timeout; a join's own is
	// bounded by MinSessionTimeout and MaxSessionTimeout.
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// Assignor is the default assignor (range).
	Assignor wire.GroupAssignor
	// EpochBlock is how many epochs a reservation covers.
	EpochBlock uint64
	// NewMemberID names a member that joins without an id. Default: 16
	// random bytes in hex.
	NewMemberID func() string
}

func (c GroupsConfig) withDefaults() GroupsConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.RebalanceTimeout <= 0 {
		c.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if c.Assignor == wire.AssignorDefault {
		c.Assignor = wire.AssignorRange
	}
	if c.EpochBlock == 0 {
		c.EpochBlock = DefaultEpochBlock
	}
	if c.NewMemberID == nil {
		c.NewMemberID = randomMemberID
	}
	return c
}

func randomMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Groups is the node's group coordinator. It implements Members for the
// partition owners. Its methods are safe for concurrent use.
type Groups struct {
	cfg GroupsConfig

	// mu guards the groups. It is held across owner steps (Assign), and
	// never across a sync.
	mu     sync.Mutex
	groups map[string]*group

	// tombs are the reservation ceilings of deleted groups, by name: a
	// group created again under the name starts above them.
	tombs map[string]fence.MemberEpoch

	// viewMu guards view, what owners read through Member while they hold
	// their own lock, and policies, what polls read: a leaf lock, so
	// owner → view never waits on mu.
	viewMu   sync.RWMutex
	view     map[memberKey]fence.MemberEpoch
	policies map[string]PolicyRecord
}

type memberKey struct{ group, member string }

// group is one consumer group.
type group struct {
	name     string
	assignor wire.GroupAssignor
	// epoch is the group epoch: the epoch of the current target.
	epoch fence.MemberEpoch
	// reserved is the highest epoch a durable reservation covers.
	reserved fence.MemberEpoch
	members  map[string]*member
	// topics are the subscribed topics as last seen live, by name.
	topics map[string]topicMeta
	// holder is the member holding each partition.
	holder map[groupPartition]string
	// dirty: the target must be computed again (membership,
	// subscriptions or topics changed).
	dirty bool
	// changed are partitions whose holder changed in this step: the
	// owners learn at its end.
	changed map[groupPartition]struct{}
	// stored is the subscription last written to metadata.
	stored []string
	// policy is the group's commit policy (Plugin "" for none).
	policy PolicyRecord
	// unborn: created in memory, no record of it written yet.
	unborn bool
}

// member is one member of a group.
type member struct {
	id    string
	epoch fence.MemberEpoch
	// joined is the epoch at which this incarnation joined: a heartbeat
	// may state any epoch from it to the current one (the member learns
	// of the epochs it moved through only from replies).
	joined fence.MemberEpoch
	topics []string // sorted
	// clientID and host name the member's program and the IP address it
	// connects from, for operators; kept in memory only, like the member.
	clientID, host string
	session        time.Duration
	rebalance      time.Duration
	deadline       time.Time
	// revokeBy is when a member that has partitions to give up is
	// removed if it has not; zero when it has none.
	revokeBy time.Time
	target   map[groupPartition]struct{}
	// held are the partitions the member holds, with their assignment
	// epochs; partitions being revoked stay here until confirmed.
	held map[groupPartition]fence.MemberEpoch
}

// incarnation is what the fence rules know of m's current incarnation;
// nil for a member the group does not know.
func (m *member) incarnation() *fence.Incarnation {
	if m == nil {
		return nil
	}
	return &fence.Incarnation{Joined: m.joined, Epoch: m.epoch}
}

// OpenGroups loads the groups persisted in cfg.Meta (their epoch
// reservations and subscriptions; no members).
func OpenGroups(cfg GroupsConfig) (*Groups, error) {
	cfg = cfg.withDefaults()
	if cfg.Meta == nil || cfg.Topics == nil {
		return nil, fmt.Errorf("group: a group coordinator needs metadata and topics")
	}
	gs := &Groups{
		cfg: cfg, groups: map[string]*group{}, tombs: map[string]fence.MemberEpoch{},
		view: map[memberKey]fence.MemberEpoch{}, policies: map[string]PolicyRecord{},
	}
	err := loadGroupRecords(cfg.Meta, func(name string, rec groupRecord) {
		if rec.deleted {
			gs.tombs[name] = rec.reserved
			return
		}
		g := newGroup(name, rec.assignor)
		g.epoch, g.reserved, g.stored, g.policy = rec.reserved, rec.reserved, rec.topics, rec.policy
		gs.groups[name] = g
		if rec.policy.Plugin != "" {
			gs.policies[name] = rec.policy
		}
	})
	if err != nil {
		return nil, err
	}
	return gs, nil
}

// createLocked creates the group called name; a group deleted under the
// name before leaves its epochs behind, and the new one continues above
// them. Called with gs.mu held.
func (gs *Groups) createLocked(name string) *group {
	g := newGroup(name, gs.cfg.Assignor)
	g.unborn = true
	if ceiling, ok := gs.tombs[name]; ok {
		g.epoch, g.reserved = ceiling, ceiling
	}
	gs.groups[name] = g
	return g
}

func newGroup(name string, a wire.GroupAssignor) *group {
	return &group{
		name: name, assignor: a, members: map[string]*member{}, topics: map[string]topicMeta{},
		holder: map[groupPartition]string{}, changed: map[groupPartition]struct{}{},
	}
}

// Member implements Members: whether the group knows the member now, and
// its member epoch.
func (gs *Groups) Member(group, member string) (bool, fence.MemberEpoch) {
	gs.viewMu.RLock()
	e, ok := gs.view[memberKey{group, member}]
	gs.viewMu.RUnlock()
	return ok, e
}

func (gs *Groups) setView(g *group, m *member) {
	gs.viewMu.Lock()
	gs.view[memberKey{g.name, m.id}] = m.epoch
	gs.viewMu.Unlock()
}

func (gs *Groups) dropView(g *group, m *member) {
	gs.viewMu.Lock()
	delete(gs.view, memberKey{g.name, m.id})
	gs.viewMu.Unlock()
}

// JoinRequest is a member joining a group (see wire.JoinGroupRequest).
type JoinRequest struct {
	Group, Member    string
	Topics           []string
	Assignor         wire.GroupAssignor
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// ClientID is the client id the member joined with, Host the IP
	// address of its connection; both only shown to operators.
	ClientID, Host string
}

// HeartbeatRequest is a member's heartbeat (see wire.HeartbeatRequest).
type HeartbeatRequest struct {
	Group, Member string
	Epoch         fence.MemberEpoch
	Owned         []wire.TopicPartition
}

// Join adds a member to a group, creating the group on first use. A
// member id the group knows joins as a new incarnation that holds
// nothing: the partitions of the earlier one are released at once.
func (gs *Groups) Join(ctx context.Context, req JoinRequest) (wire.MemberAssignment, error) {
	if err := checkJoin(req); err != nil {
		return wire.MemberAssignment{}, err
	}
	if req.Member == "" {
		req.Member = gs.cfg.NewMemberID()
	}
	return gs.step(ctx, req.Group, true, func(g *group, now time.Time) (*member, error) {
		if old := g.members[req.Member]; old != nil {
			gs.remove(g, old, "joined again")
		}
		if len(g.members) == 0 {
			g.assignor = req.Assignor
			if g.assignor == wire.AssignorDefault {
				g.assignor = gs.cfg.Assignor
			}
		}
		m := &member{
			id: req.Member, topics: slices.Compact(slices.Sorted(slices.Values(req.Topics))),
			clientID: req.ClientID, host: req.Host,
			session:   clampDuration(req.SessionTimeout, gs.cfg.SessionTimeout, MinSessionTimeout, MaxSessionTimeout),
			rebalance: clampDuration(req.RebalanceTimeout, gs.cfg.RebalanceTimeout, MinSessionTimeout, time.Hour),
			target:    map[groupPartition]struct{}{}, held: map[groupPartition]fence.MemberEpoch{},
		}
		m.deadline = now.Add(m.session)
		g.members[m.id] = m
		g.dirty = true
		gs.cfg.Logger.Info("group member joined", "group", g.name, "member", m.id, "topics", m.topics,
			"client_id", m.clientID, "host", m.host)
		return m, nil
	})
}

// Heartbeat refreshes a member's session, takes the partitions it says it
// owns as confirmation of the revocations it was asked for, and returns
// its epoch and assignment now. The epoch a heartbeat states may lag the
// member's: the coordinator moves a member that has nothing to give up
// to the group epoch at once, and the member learns of it from the reply.
// Heartbeats of a member are sequential, so a partition it leaves out of
// what it owns is one it does not hold: a revoked one is released. A
// member the group does not know gets fence.ErrUnknownMember; an epoch
// this incarnation never had gets fence.ErrFencedMember. Either way the
// member must rejoin.
func (gs *Groups) Heartbeat(ctx context.Context, req HeartbeatRequest) (wire.MemberAssignment, error) {
	return gs.step(ctx, req.Group, false, func(g *group, now time.Time) (*member, error) {
		m := g.members[req.Member]
		if err := fence.CheckHeartbeat(m.incarnation(), req.Epoch); err != nil {
			return nil, fmt.Errorf("group %q, member %q: %w", req.Group, req.Member, err)
		}
		m.deadline = now.Add(m.session)
		gs.confirmRevocations(g, m, req.Owned)
		return m, nil
	})
}

// Leave removes a member at once: its partitions move without waiting for
// revocations (the member stopped and committed first). A leave stating
// an epoch from before the member's current incarnation joined is from
// that earlier incarnation and is ignored; epoch 0 leaves whatever the
// incarnation. Leaving a member the group does not know is not an error.
func (gs *Groups) Leave(ctx context.Context, groupName, memberID string, epoch fence.MemberEpoch) error {
	_, err := gs.step(ctx, groupName, false, func(g *group, now time.Time) (*member, error) {
		if m := g.members[memberID]; m != nil && fence.LeaveApplies(*m.incarnation(), epoch) {
			gs.remove(g, m, "left")
		}
		return nil, nil
	})
	return err
}

// Expire removes, in every group, the members whose session expired and
// those that did not give up revoked partitions within their rebalance
// timeout; their partitions move.
func (gs *Groups) Expire(ctx context.Context) error {
	gs.mu.Lock()
	names := make([]string, 0, len(gs.groups))
	for name, g := range gs.groups {
		if len(g.members) > 0 {
			names = append(names, name)
		}
	}
	gs.mu.Unlock()
	slices.Sort(names)
	for _, name := range names {
		if _, err := gs.step(ctx, name, false, func(*group, time.Time) (*member, error) { return nil, nil }); err != nil {
			return err
		}
	}
	return nil
}

// Run calls Expire every interval until ctx ends.
func (gs *Groups) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := gs.Expire(ctx); err != nil && ctx.Err() == nil {
				gs.cfg.Logger.Warn("group expiry failed", "err", err)
			}
		}
	}
}

func checkJoin(req JoinRequest) error {
	switch {
	case req.Group == "" || len(req.Group) > wire.MaxNameLen:
		return invalidArgument(fmt.Sprintf("group name %q: want 1 to %d bytes", req.Group, wire.MaxNameLen))
	case len(req.Topics) == 0:
		return invalidArgument("a member must subscribe to at least one topic")
	case len(req.Member) > wire.MaxNameLen:
		return invalidArgument("member id longer than 255 bytes")
	}
	for _, t := range req.Topics {
		if t == "" {
			return invalidArgument("empty topic name in the subscription")
		}
	}
	return nil
}

func clampDuration(d, def, lo, hi time.Duration) time.Duration {
	if d <= 0 {
		d = def
	}
	return min(max(d, lo), hi)
}

// errUnknownGroup: a heartbeat or leave names no group the node has.
func errUnknownGroup(name string) error {
	return fence.FromCode(fence.CodeUnknownMember, fmt.Sprintf("no group %q", name))
}

// step runs fn as one step of the group called name, at Config.Now: the
// timeouts first, then fn, then the reconciliation, with the owner steps
// of every partition whose holder changed; it returns the assignment of
// the member fn names. A step bumps the group epoch at most once; if the
// next epoch is not covered by a durable reservation, step reserves a
// block first (synced outside the lock), so an epoch is durable before
// any member or owner sees it.
func (gs *Groups) step(ctx context.Context, name string, create bool, fn func(g *group, now time.Time) (*member, error)) (wire.MemberAssignment, error) {
	for {
		gs.mu.Lock()
		g := gs.groups[name]
		if g == nil {
			if !create {
				gs.mu.Unlock()
				return wire.MemberAssignment{}, errUnknownGroup(name)
			}
			g = gs.createLocked(name)
		}
		if g.epoch >= g.reserved {
			ceiling := g.epoch + fence.MemberEpoch(gs.cfg.EpochBlock)
			t, err := putGroupRecord(gs.cfg.Meta, g.name, g.record(ceiling))
			gs.mu.Unlock()
			if err == nil {
				err = gs.cfg.Meta.Sync(ctx, t)
			}
			if err != nil {
				gs.forgetUnborn(name)
				return wire.MemberAssignment{}, err
			}
			gs.mu.Lock()
			g.reserved, g.unborn = max(g.reserved, ceiling), false
			gs.mu.Unlock()
			continue
		}
		now := gs.cfg.Now()
		gs.expire(g, now)
		m, err := fn(g, now)
		gs.reconcile(g, now)
		var out wire.MemberAssignment
		if err == nil && m != nil {
			out = gs.assignmentOf(g, m)
		}
		if sub := g.subscription(); !slices.Equal(sub, g.stored) {
			// Not waited for: the subscription only tells DescribeGroup
			// which offsets to show for a group without members.
			if _, perr := putGroupRecord(gs.cfg.Meta, g.name, g.record(g.reserved)); perr == nil {
				g.stored = sub
			}
		}
		gs.mu.Unlock()
		return out, err
	}
}

// record is what the group keeps in metadata with the reservation
// ceiling: its subscription stamped with the topics' ids as last seen.
func (g *group) record(ceiling fence.MemberEpoch) groupRecord {
	r := groupRecord{reserved: ceiling, assignor: g.assignor, topics: g.subscription(), policy: g.policy}
	for _, t := range r.topics {
		r.ids = append(r.ids, g.topics[t].id)
	}
	return r
}

// forgetUnborn drops a group created by a step that could not reserve
// its first epochs, so that no empty group is left behind.
func (gs *Groups) forgetUnborn(name string) {
	gs.mu.Lock()
	if g := gs.groups[name]; g != nil && g.unborn && len(g.members) == 0 && g.policy.Plugin == "" {
		delete(gs.groups, name)
	}
	gs.mu.Unlock()
}

// expire removes the members whose session or revocation ran out.
// Called with gs.mu held.
func (gs *Groups) expire(g *group, now time.Time) {
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		switch {
		case !now.Before(m.deadline):
			gs.remove(g, m, "session expired")
		case !m.revokeBy.IsZero() && !now.Before(m.revokeBy):
			gs.remove(g, m, "did not give up revoked partitions within the rebalance timeout")
		}
	}
}

// remove takes a member out of the group: it is unknown from now on, and
// its partitions are free. Called with gs.mu held.
func (gs *Groups) remove(g *group, m *member, why string) {
	gs.dropView(g, m)
	for p := range m.held {
		gs.release(g, p)
	}
	delete(g.members, m.id)
	g.dirty = true
	gs.cfg.Logger.Info("group member removed", "group", g.name, "member", m.id, "epoch", m.epoch, "reason", why)
}

// release frees a partition. Called with gs.mu held.
func (gs *Groups) release(g *group, p groupPartition) {
	if id, ok := g.holder[p]; ok {
		if m := g.members[id]; m != nil {
			delete(m.held, p)
		}
		delete(g.holder, p)
		g.changed[p] = struct{}{}
	}
}

// confirmRevocations releases the partitions the member was asked to give
// up and no longer owns. Called with gs.mu held.
func (gs *Groups) confirmRevocations(g *group, m *member, owned []wire.TopicPartition) {
	if len(m.held) == len(m.target) {
		if _, revoking := firstRevoking(m); !revoking {
			return
		}
	}
	for _, p := range sortedPartitions(m.held) {
		if _, keep := m.target[p]; keep || ownsPartition(owned, p) {
			continue
		}
		gs.release(g, p)
	}
}

func firstRevoking(m *member) (groupPartition, bool) {
	for p := range m.held {
		if _, ok := m.target[p]; !ok {
			return p, true
		}
	}
	return groupPartition{}, false
}

func ownsPartition(owned []wire.TopicPartition, p groupPartition) bool {
	for _, o := range owned {
		if o.Topic == p.topic && o.Partition == p.index {
			return true
		}
	}
	return false
}
