package session

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/downlink"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/node/tokens"
	"github.com/ledgemq/ledge/node/transform"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/wire"
)

// Node is what a session reaches of the node that serves it: its live
// topics, its registries (tokens, producers, consumer sessions, plugins),
// the group coordinator, the uplinks, and the limits and places of long
// polls. The node implements it; a test may implement it over a few
// owners.
type Node interface {
	// Lookup returns the live topic name; a non-zero id must be the
	// topic's (fence.CodeTopicRecreated otherwise).
	Lookup(name string, id [16]byte) (*Topic, error)
	// Topics returns the live topics by name.
	Topics() []*Topic
	// CreateTopic and DeleteTopic change the node's topics.
	CreateTopic(ctx context.Context, name string, cfg wire.TopicConfig) (wire.TopicInfo, error)
	DeleteTopic(ctx context.Context, name string, id [16]byte) error

	Tokens() *tokens.Registry
	// CloseToken closes the connections authenticated with a revoked
	// token, on every listener, and returns how many.
	CloseToken(tok *tokens.Token) int
	Producers() *owner.Producers
	Consumers() *owner.Sessions
	Groups() *group.Groups
	// GroupDeleted tells the listeners that a group was deleted, so that
	// they drop what they keep about it.
	GroupDeleted(group string)
	Uplinks() *uplink.Manager
	// Transforms is the node's transform manager.
	Transforms() *transform.Manager
	Downlinks() *downlink.Manager
	// Plugins is the plugin registry (nil when the node has none).
	Plugins() *pluginreg.Registry

	// Limits are the node's bounds of a poll.
	Limits() Limits
	// Park takes one of the node's places for a poll that may wait for
	// wait; false when the poll would not wait or every place is taken.
	// A place taken is given back with Unpark.
	Park(wait time.Duration) bool
	Unpark()
	// Draining ends when the node starts to shut down: parked polls
	// answer.
	Draining() context.Context
	// Go runs f on a goroutine the node waits for when it closes.
	Go(f func())
	Logger() *slog.Logger
	// Now is the node's clock, of token expiry.
	Now() time.Time
}

// Limits bound what a poll may ask of the node.
type Limits struct {
	MaxPollWait    time.Duration // the longest a poll parks
	MaxParkedPolls int           // parked polls at once (for the message of ErrBusy)
	MaxPollBytes   int           // the bytes of one poll reply
	PollBytes      int           // the bytes of a poll reply that names no bound
}

// Topic is a live topic: its identity, configuration, logs and owners.
// The node builds it (NewTopic, then one AddPartition per partition) and
// cancels it when the topic is deleted.
type Topic struct {
	Name   string
	ID     fence.TopicID
	Config wire.TopicConfig
	Logs   []owner.PartitionLog
	Owners []*owner.Owner
	// gone ends when the topic is deleted: parked polls on it wake.
	gone   context.Context
	cancel context.CancelFunc
}

// NewTopic is a topic without partitions yet, deleted once base ends or
// Delete is called.
func NewTopic(base context.Context, name string, id fence.TopicID, cfg wire.TopicConfig) *Topic {
	t := &Topic{Name: name, ID: id, Config: cfg}
	t.gone, t.cancel = context.WithCancel(base)
	return t
}

// AddPartition adds the next partition of the topic.
func (t *Topic) AddPartition(l owner.PartitionLog, o *owner.Owner) {
	t.Logs = append(t.Logs, l)
	t.Owners = append(t.Owners, o)
}

// Delete marks the topic deleted: the polls parked on it wake.
func (t *Topic) Delete() { t.cancel() }

// Deleted reports whether the topic was deleted.
func (t *Topic) Deleted() bool { return t.gone.Err() != nil }

// Info is the topic as replies carry it.
func (t *Topic) Info() wire.TopicInfo {
	return wire.TopicInfo{Name: t.Name, ID: t.ID, Config: t.Config}
}

// Owner returns the owner of partition p.
func (t *Topic) Owner(p uint32) (*owner.Owner, error) {
	if uint64(p) >= uint64(len(t.Owners)) {
		return nil, fmt.Errorf("%w: %s has %d partitions, no partition %d", ErrUnknownPartition, t.Name, len(t.Owners), p)
	}
	return t.Owners[p], nil
}

// State describes partition p as replies carry it.
func (t *Topic) State(p uint32) wire.PartitionState {
	if _, err := t.Owner(p); err != nil {
		s, msg := StatusOf(err)
		return wire.PartitionState{Partition: p, Status: s, Message: msg}
	}
	st := t.Logs[p].State()
	ps := wire.PartitionState{
		Partition: p, StartOffset: st.LogStart, HighWatermark: st.HighWatermark, History: uint64(st.History),
	}
	if st.Failed != nil {
		ps.Status, ps.Message = StatusOf(fmt.Errorf("%w: %w", ErrPartitionFailed, st.Failed))
	}
	return ps
}

// Session is the session of an authenticated token on a connection: every
// request the connection brings is a Call of it.
type Session struct {
	n    Node
	tok  *tokens.Token
	host string // the IP address of the client's connection ("" when unknown)
	// flags are what the client announced it reads (SetClientFlags).
	flags wire.AuthFlags
}

// New is the session of tok, authenticated on a connection from host (an
// IP address, "" when unknown).
func New(n Node, tok *tokens.Token, host string) *Session {
	return &Session{n: n, tok: tok, host: host}
}

// Token is the session's token.
func (s *Session) Token() *tokens.Token { return s.tok }

// Call is one request of the session. kind names it in the logs (0 when
// the request is not a frame).
func (s *Session) Call(kind wire.Kind) *Call {
	return &Call{s: s, kind: kind}
}

// Call is one request of a session being served, whatever transport
// brought it (a QUIC frame, a Kafka request): the node, the token it is
// authorized against, and the state its reply waits on. The handlers of
// the protocol's requests are its methods, taking and returning the
// protocol's messages, with their scope check inside; none of them sees
// a transport.
type Call struct {
	s    *Session
	kind wire.Kind
	// share, when set, shares the bytes the request was read into with the
	// storage engine (SetShare).
	share Sharer
	// deferring lets a handler leave the wait for its durability to the
	// transport (Defer); deferred says it did.
	deferring, deferred bool
	// polled are the poll results the reply refers to, released once it
	// is written (ReleasePolled).
	polled []owner.PollResult

	// The effects a deferred reply waits for: every offset up to logEnd
	// in log, of topic logTopic (whose errors they are); or those a
	// goroutine waits for (durable), which sets waitErr and closes waited.
	logTopic *Topic
	log      owner.PartitionLog
	logEnd   uint64
	waited   chan struct{}
	waitErr  error

	// scratch is what the handlers reuse from one request to the next
	// when the transport reuses its calls (Init).
	scratch callScratch
}

// Sharer shares the bytes a request was read into with the storage
// engine: ShareFrame returns the engine's release, or nil when it cannot
// (the engine copies the batch).
type Sharer interface{ ShareFrame() func() }

// Init makes c a call of s, for a transport that keeps its calls in
// place (a QUIC request embeds one).
// It keeps the memory the call's handlers reuse (callScratch).
func (c *Call) Init(s *Session, kind wire.Kind) {
	*c = Call{s: s, kind: kind, polled: c.polled[:0], scratch: c.scratch}
}

// SetShare has a produce share the frame it was read from through sh.
func (c *Call) SetShare(sh Sharer) { c.share = sh }

// Defer lets the call's handler leave the wait for the durability of its
// effects to the caller: a handler that orders effects then returns at
// once, Deferred reports it, and WaitDurable waits.
func (c *Call) Defer() { c.deferring = true }

// Deferred reports whether the reply waits for effects to be durable
// (WaitDurable).
func (c *Call) Deferred() bool { return c.deferred }

// Undefer forgets the wait of a handler that failed after deferring it.
func (c *Call) Undefer() { c.deferred = false }

// ReleasePolled gives the memory of the poll results the request's reply
// referred to back to the engine.
func (c *Call) ReleasePolled() {
	for i := range c.polled {
		c.polled[i].Release()
	}
	clear(c.polled)
	c.polled = c.polled[:0]
}

// WaitEnded reports whether nothing started for the call's deferred reply
// runs any more: no wait was started, or it returned. A transport that
// reuses its calls (Init) reuses only those.
func (c *Call) WaitEnded() bool {
	if c.waited == nil {
		return true
	}
	select {
	case <-c.waited:
		return true
	default:
		return false
	}
}

// durable has the request's ordered effects made durable. A handler calls
// it once its owners returned from ordering, with wait, which waits for
// durability and may complete the reply in place. When the call is
// deferring, wait starts at once in its own goroutine, so that the waits
// of consecutive requests (metadata syncs, which no probe may start)
// overlap, and the handler returns: the stream's next request starts (and
// its effects land after this one's) while this one waits; the reply is
// encoded once wait returned, or wait's error is answered. Otherwise
// durable waits and returns wait's error.
func (c *Call) durable(ctx context.Context, wait func(context.Context) error) error {
	if !c.deferring {
		return wait(ctx)
	}
	done := make(chan struct{})
	kind := c.kind
	log := c.s.n.Logger()
	c.s.n.Go(func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				log.Error("request handler panicked", "kind", kind, "panic", p, "stack", string(debug.Stack()))
				c.waitErr = fmt.Errorf("node: the request handler panicked: %v", p)
			}
		}()
		c.waitErr = wait(ctx)
	})
	c.deferred, c.waited = true, done
	return nil
}

// durableIn is durable for d, an effect in the log of t, whose errors
// are t's (topicError). When d is the log's alone, its durability can be
// asked without waiting (DurableNow), so nothing is started: on a stream
// the writer waits for it, or the reading goroutine replies at once when
// it is durable already. Every produce comes this way, and allocates
// nothing for it.
func (c *Call) durableIn(ctx context.Context, t *Topic, d owner.Durable) error {
	log, end, ok := d.LogOnly()
	if !c.deferring || !ok {
		return c.durable(ctx, func(ctx context.Context) error { return waitIn(ctx, t, d) })
	}
	c.deferred, c.logTopic, c.log, c.logEnd = true, t, log, end
	return nil
}

// waitIn waits for d, an effect in the log of t, to be durable.
func waitIn(ctx context.Context, t *Topic, d owner.Durable) error {
	if err := d.Wait(ctx); err != nil {
		return topicError(t, err)
	}
	return nil
}

// WaitDurable waits for the effects of the call's deferred reply to be
// durable.
func (c *Call) WaitDurable(ctx context.Context) error {
	if c.waited != nil {
		<-c.waited
		return c.waitErr
	}
	return waitIn(ctx, c.logTopic, c.logDurable())
}

// DurableNow reports whether WaitDurable would return at once.
func (c *Call) DurableNow() bool {
	if c.waited != nil {
		select {
		case <-c.waited:
			return true
		default:
			return false
		}
	}
	return c.logDurable().Now()
}

// logDurable is the log's effect a deferred reply waits for.
func (c *Call) logDurable() owner.Durable { return owner.LogDurable(c.log, c.logEnd) }

// allow returns ErrForbidden unless the token grants want on topic.
func (c *Call) allow(topic string, want wire.Scope) error {
	if c.s.tok.Allows(topic, want) {
		return nil
	}
	if topic == "" {
		return fmt.Errorf("%w: token %s lacks the %s scope", ErrForbidden, c.s.tok.Info.ID, want)
	}
	return fmt.Errorf("%w: token %s lacks the %s scope on topic %q", ErrForbidden, c.s.tok.Info.ID, want, topic)
}
