package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// GroupConsumer is a member of a consumer group: the node shares the
// partitions of the group's topics out among its members, and each
// partition is read by one member at a time.
//
// The node drives the assignment (a member heartbeats in the background
// and reconciles toward what the node tells it). Rebalances are carried
// out inside Poll, on the caller's goroutine, with the OnAssigned,
// OnRevoked and OnLost callbacks. A partition the member is asked to give
// up is committed (AtLeastOnce), passed to OnRevoked, and only then
// released: until the member confirms, nobody else reads it, and the
// member's commits for it are still accepted.
//
// Every poll reply carries a fence token per partition, and every commit
// carries the token of the poll it derives from: the node accepts it only
// if the member holds the partition under the assignment the poll was
// made in (a partition lost and received again is a new assignment) and
// the partition's history is the same. When the node refuses a commit or
// a poll of a partition as fenced, the member drops what was pending for
// it, calls OnLost, and commits nothing more for it until the node
// assigns it again; when the node no longer knows the member, every
// partition is lost and the member rejoins.
//
// Poll, Commit, CommitPolled and Close may be called from different
// goroutines, but Poll is meant for one, and callbacks must not call Poll.
type GroupConsumer struct {
	b      groupBackend
	group  string
	topics []string
	cfg    groupConfig
	log    *slog.Logger

	pollMu   sync.Mutex // one Poll (or Close) at a time
	stream   requestStream
	inflight *groupPoll // a poll whose caller stopped waiting

	mu sync.Mutex
	// who is the member as polls and commits name it.
	who wire.Consumer
	// latest is what the node last told the member.
	latest wire.MemberAssignment
	// incarnation counts joins: a heartbeat reply of an earlier one is
	// ignored.
	incarnation int
	parts       map[TopicPartition]*heldPartition
	// fenced is why the node no longer knows the member; Poll rejoins.
	fenced  error
	changed chan struct{} // closed when the heartbeat loop learns something
	closed  bool

	wake     chan struct{} // heartbeat at once
	stop     context.CancelFunc
	loopDone chan struct{}
}

// heldPartition is a partition the member holds.
type heldPartition struct {
	tp      TopicPartition
	topicID [16]byte
	// assignment is the assignment epoch the node gave it: the one its
	// polls' tokens carry.
	assignment uint64
	cur        *cursor
	// pending is the latest delivery not yet committed (AtLeastOnce).
	pending *pollPartition
	// blocked: the node refused the member's work on it as fenced. It is
	// neither read nor committed until the node assigns it again.
	blocked bool
	// stateful: its state was loaded (LoadState); its offset moves only
	// with its state (CommitState), never by an automatic commit.
	stateful bool
}

// groupBackend is what a GroupConsumer needs of a client (and what tests
// fake).
type groupBackend interface {
	streamOpener
	call(ctx context.Context, req, reply wire.Message) error
	requestTimeout() time.Duration
	nextID() uint32
	logger() *slog.Logger
}

type groupClient struct{ c *Client }

func (g groupClient) openStream(ctx context.Context, depth int) (requestStream, int, error) {
	return g.c.openStream(ctx, depth)
}
func (g groupClient) call(ctx context.Context, req, reply wire.Message) error {
	return g.c.call(ctx, req, reply)
}
func (g groupClient) requestTimeout() time.Duration { return g.c.cfg.requestTimeout }
func (g groupClient) nextID() uint32                { return g.c.nextID() }
func (g groupClient) logger() *slog.Logger          { return g.c.cfg.logger }

// NewGroupConsumer joins the group as a member subscribed to topics and
// starts heartbeating. The first Poll reads what the node assigned.
func (c *Client) NewGroupConsumer(ctx context.Context, group string, topics []string, opts ...GroupOption) (*GroupConsumer, error) {
	cfg := defaultGroupConfig()
	for _, o := range opts {
		o.applyGroup(&cfg)
	}
	if err := c.followGroupPolicy(ctx, group, &cfg); err != nil {
		return nil, err
	}
	return newGroupConsumer(ctx, groupClient{c}, group, topics, cfg)
}

func newGroupConsumer(ctx context.Context, b groupBackend, group string, topics []string, cfg groupConfig) (*GroupConsumer, error) {
	if group == "" || len(topics) == 0 {
		return nil, fmt.Errorf("sdk: a group consumer needs a group name and at least one topic")
	}
	g := &GroupConsumer{
		b: b, group: group, topics: slices.Clone(topics), cfg: cfg, log: b.logger(),
		parts: map[TopicPartition]*heldPartition{}, changed: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	if err := g.join(ctx); err != nil {
		return nil, err
	}
	loopCtx, stop := context.WithCancel(context.Background())
	g.stop, g.loopDone = stop, make(chan struct{})
	go g.heartbeatLoop(loopCtx)
	return g, nil
}

// Group returns the group's name.
func (g *GroupConsumer) Group() string { return g.group }

// MemberID returns the member's id.
func (g *GroupConsumer) MemberID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.who.MemberID
}

// Assignment returns the partitions the member holds now.
func (g *GroupConsumer) Assignment() []TopicPartition {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]TopicPartition, 0, len(g.parts))
	for tp, hp := range g.parts {
		if !hp.blocked {
			out = append(out, tp)
		}
	}
	sortTPs(out)
	return out
}

func sortTPs(tps []TopicPartition) {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
}

// join joins (or rejoins) the group under the member's id. The member
// holds nothing when it joins.
func (g *GroupConsumer) join(ctx context.Context) error {
	g.mu.Lock()
	id := g.who.MemberID
	if id == "" {
		id = g.cfg.memberID
	}
	g.mu.Unlock()
	var reply wire.JoinGroupReply
	err := g.b.call(ctx, &wire.JoinGroupRequest{
		Group: g.group, MemberID: id, Assignor: g.cfg.assignor,
		SessionTimeout: g.cfg.sessionTimeout, RebalanceTimeout: g.cfg.rebalanceTimeout, Topics: g.topics,
		ClientID: g.cfg.clientID,
	}, &reply)
	if err != nil {
		return fmt.Errorf("sdk: join group %s: %w", g.group, err)
	}
	g.mu.Lock()
	g.who = wire.Consumer{Kind: wire.ConsumerMember, Name: g.group, MemberID: reply.MemberID, MemberEpoch: reply.MemberEpoch}
	g.latest = reply.MemberAssignment
	g.incarnation++
	g.fenced = nil
	g.notifyLocked()
	g.mu.Unlock()
	return nil
}

// notifyLocked wakes a Poll waiting for news. Called with g.mu held.
func (g *GroupConsumer) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// heartbeatNow asks the heartbeat loop for a heartbeat at once.
func (g *GroupConsumer) heartbeatNow() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// heartbeatLoop heartbeats at the interval the node gives, and at once
// when Poll gave partitions up. A reply of the current incarnation updates
// what the member is to hold; a fence marks the member for rejoining.
func (g *GroupConsumer) heartbeatLoop(ctx context.Context) {
	defer close(g.loopDone)
	timer := time.NewTimer(g.interval())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-g.wake:
		}
		g.heartbeat(ctx)
		timer.Reset(g.interval())
	}
}

func (g *GroupConsumer) interval() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d := g.latest.HeartbeatInterval; d > 0 {
		return d
	}
	return time.Second
}

func (g *GroupConsumer) heartbeat(ctx context.Context) {
	g.mu.Lock()
	if g.fenced != nil || g.closed {
		g.mu.Unlock()
		return
	}
	inc := g.incarnation
	req := &wire.HeartbeatRequest{Group: g.group, MemberID: g.who.MemberID, MemberEpoch: g.latest.MemberEpoch}
	for tp := range g.parts {
		req.Owned = append(req.Owned, wire.TopicPartition{Topic: tp.Topic, Partition: uint32(tp.Partition)})
	}
	g.mu.Unlock()
	var reply wire.HeartbeatReply
	err := g.b.call(ctx, req, &reply)
	g.mu.Lock()
	defer g.mu.Unlock()
	if inc != g.incarnation || ctx.Err() != nil {
		return
	}
	switch {
	case err == nil:
		g.latest = reply.MemberAssignment
		g.notifyLocked()
	case isRejoin(err):
		g.fenced = err
		g.notifyLocked()
	default:
		// The session lives on at the node until it times out; the next
		// heartbeat tries again.
		g.log.Warn("group heartbeat failed", "group", g.group, "err", err)
	}
}

func isRejoin(err error) bool {
	a, ok := fence.ActionOf(err)
	return ok && a == fence.Rejoin
}

// isMemberFence reports a refusal of one partition's work because the
// member does not hold it under the assignment the work was made in.
func isMemberFence(err error) bool {
	return errors.Is(err, fence.ErrUnassignedPartition) || errors.Is(err, fence.ErrStaleMemberEpoch)
}

// Close gives every partition up in order — commits what is pending
// (AtLeastOnce), calls OnRevoked — and leaves the group, so that the
// partitions move at once.
func (g *GroupConsumer) Close(ctx context.Context) error {
	g.pollMu.Lock()
	defer g.pollMu.Unlock()
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	fenced := g.fenced
	var held []TopicPartition
	for tp, hp := range g.parts {
		if !hp.blocked {
			held = append(held, tp)
		}
	}
	sortTPs(held)
	g.mu.Unlock()
	var err error
	if fenced == nil {
		if g.cfg.delivery == AtLeastOnce {
			err = g.commitPending(ctx, nil)
		}
		if g.cfg.onRevoked != nil && len(held) > 0 {
			g.cfg.onRevoked(ctx, held)
		}
		g.mu.Lock()
		leave := &wire.LeaveGroupRequest{Group: g.group, MemberID: g.who.MemberID, MemberEpoch: g.latest.MemberEpoch}
		g.mu.Unlock()
		if lerr := g.b.call(ctx, leave, &wire.LeaveGroupReply{}); lerr != nil {
			err = errors.Join(err, fmt.Errorf("sdk: leave group %s: %w", g.group, lerr))
		}
	}
	g.stop()
	<-g.loopDone
	if g.stream != nil {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		if g.inflight != nil {
			cancel() // a long poll may be parked: do not wait for it
		}
		_ = g.stream.Close(cctx)
		cancel()
		g.stream = nil
	}
	return err
}
