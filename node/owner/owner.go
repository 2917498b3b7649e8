package owner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
)

// OwnerConfig is what an owner is built from.
type OwnerConfig struct {
	Topic     fence.TopicID
	Partition uint32
	Log       PartitionLog
	Meta      Metadata
	// Producers is the node-wide producer registry; nil refuses idempotent
	// batches.
	Producers *Producers
	// Sessions is the node-wide session registry of named consumers; nil
	// means named consumers never attach (every session is epoch 0).
	Sessions *Sessions
	// Members answers for the group coordinator; nil means no groups.
	Members Members
	// AppendTime says the topic's timestamps are stamped by the log at
	// append: produce results then carry the stamped time.
	AppendTime bool
	// RetentionFloor, when set, is asked at every enforcement of retention
	// for the lowest offset retention must keep (an uplink that has not
	// forwarded the records above it); false means no floor.
	RetentionFloor func() (uint64, bool)
}

// Owner owns one partition. Its methods are safe for concurrent use.
type Owner struct {
	topic     fence.TopicID
	index     uint32
	log       PartitionLog
	meta      Metadata
	producers *Producers
	sessions  *Sessions
	members   Members
	// appendTime: read the stamped time back from appended batches.
	appendTime bool
	// retentionFloor and hold: see OwnerConfig.RetentionFloor and
	// RetentionHold.
	retentionFloor func() (uint64, bool)
	hold           retentionHold

	// appendMu orders appends: a batch's producer check and its append are
	// one step, and no other append comes between them. It is not mu, so
	// that an append the log holds up (its offset reservation or queue)
	// never stalls polls and commits.
	appendMu sync.Mutex

	// closed is set, and closing closed, by Close (under mu and before
	// appendMu is taken): every later step is refused.
	closed  atomic.Bool
	closing chan struct{}
	// closeReason is what every step refused after Close returns:
	// ErrOwnerClosed, or ErrTopicDeleted when the topic was deleted. Set
	// before closed.
	closeReason error

	mu           sync.Mutex
	consumers    map[string]*progress // named consumers
	groups       map[string]*progress // groups
	assignments  map[string]assignment
	lineage      []fence.HistoryTransition // cached for lineageEpoch
	lineageEpoch fence.HistoryEpoch

	// keys holds the parked key polls (PollRequest.Key) by key.
	keys keyIndex
}

// NewOwner builds the owner of a partition.
func NewOwner(cfg OwnerConfig) (*Owner, error) {
	if cfg.Log == nil || cfg.Meta == nil {
		return nil, errors.New("owner: an owner needs a log and a metadata store")
	}
	return &Owner{
		topic:       cfg.Topic,
		index:       cfg.Partition,
		log:         cfg.Log,
		meta:        cfg.Meta,
		producers:   cfg.Producers,
		sessions:    cfg.Sessions,
		members:     cfg.Members,
		appendTime:  cfg.AppendTime,
		closing:     make(chan struct{}),
		consumers:   map[string]*progress{},
		groups:      map[string]*progress{},
		assignments: map[string]assignment{},

		retentionFloor: cfg.RetentionFloor,
	}, nil
}

// PartitionState is a partition's state as clients see it.
type PartitionState = fence.Partition

// State returns the partition's current state.
func (o *Owner) State() PartitionState { return o.facts() }

// Skipped returns how many offsets of [from, to) hold no record because a
// recovery skipped them (0 for a log that does not say): a lag in records
// leaves them out.
func (o *Owner) Skipped(from, to uint64) uint64 {
	if sk, ok := o.log.(interface{ Skipped(from, to uint64) uint64 }); ok {
		return sk.Skipped(from, to)
	}
	return 0
}

// facts returns the partition's current state as fence sees it.
func (o *Owner) facts() fence.Partition {
	st := o.log.State()
	return fence.Partition{Topic: o.topic, Index: o.index, History: st.History, LogStart: st.LogStart, HighWatermark: st.HighWatermark}
}

// lineageOf returns the partition's lineage ending at p.History. Called
// with o.mu held.
func (o *Owner) lineageOf(p fence.Partition) []fence.HistoryTransition {
	if o.lineage == nil || o.lineageEpoch != p.History {
		o.lineage = o.log.Lineage()
		if n := len(o.lineage); n > 0 {
			o.lineageEpoch = o.lineage[n-1].Epoch
		}
	}
	return o.lineage
}

// holder returns what the owner knows now of the consumer c. Called with
// o.mu held.
func (o *Owner) holder(c Consumer) fence.Holder {
	switch c.kind() {
	case fence.HolderConsumer:
		h := fence.Holder{Kind: fence.HolderConsumer, Consumer: fence.NameHash(c.Name)}
		if o.sessions != nil {
			h.Session = o.sessions.Current(c.Name)
		}
		return h
	case fence.HolderMember:
		f := fence.MemberFacts{ID: fence.NameHash(c.Member)}
		if o.members != nil {
			f.Known, f.Epoch = o.members.Member(c.Name, c.Member)
		}
		if a, ok := o.assignments[c.Name]; ok && a.member == c.Member {
			f.Holds, f.AssignmentEpoch = true, a.assignmentEpoch
		}
		return fence.Holder{Kind: fence.HolderMember, Consumer: fence.NameHash(c.Name), Member: f}
	}
	return fence.Holder{Kind: fence.HolderAnonymous}
}

// CheckToken reports whether the owner would accept tok from c now: nil,
// or the fence error a step with it would be refused with.
func (o *Owner) CheckToken(c Consumer, tok fence.Token) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fence.CheckCurrent(o.facts(), o.holder(c), tok)
}

// checkRequester checks the identity a request claims before new work is
// created for it: the session it attached with, or the member epoch it
// states. Called with o.mu held.
func (o *Owner) checkRequester(c Consumer, h fence.Holder) error {
	switch h.Kind {
	case fence.HolderConsumer:
		return fence.CheckSession(h.Session, c.Session)
	case fence.HolderMember:
		return fence.CheckMember(h.Member, c.MemberEpoch)
	}
	return nil
}

// progressOf returns the progress record of a named consumer or group,
// creating it on first use; nil for anonymous consumers. Called with o.mu
// held.
func (o *Owner) progressOf(c Consumer) *progress {
	var m map[string]*progress
	var key func(name string) string
	switch c.kind() {
	case fence.HolderConsumer:
		m, key = o.consumers, consumerBookmarkKey
	case fence.HolderMember:
		m, key = o.groups, GroupBookmarkKey
	default:
		return nil
	}
	pr, ok := m[c.Name]
	if !ok {
		pr = &progress{key: key(c.Name)}
		m[c.Name] = pr
	}
	return pr
}

// loadCommitted fills pr's bookmark cache. Called with o.mu held.
func (o *Owner) loadCommitted(pr *progress) error {
	if pr.loaded {
		return nil
	}
	b, ok, err := o.log.Bookmark(pr.key)
	if err != nil {
		return err
	}
	pr.committed, pr.hasCommitted, pr.loaded = b, ok, true
	return nil
}

// resolveCommitted resolves pr's bookmark in the current history. ok is
// false when the consumer has no bookmark. Called with o.mu held.
func (o *Owner) resolveCommitted(p fence.Partition, pr *progress) (res fence.Resolution, ok bool, err error) {
	if err := o.loadCommitted(pr); err != nil || !pr.hasCommitted {
		return fence.Resolution{}, false, err
	}
	res, err = fence.ResolveBookmark(p, o.lineageOf(p), pr.committed.Offset, pr.committed.History)
	return res, err == nil, err
}

// committedFloor is the offset progress may not go below without a reset:
// the resolved committed offset, or 0 when there is none (or it fell below
// the log start). Called with o.mu held.
func (o *Owner) committedFloor(p fence.Partition, pr *progress) (uint64, error) {
	res, ok, err := o.resolveCommitted(p, pr)
	if err != nil || !ok || res.Outcome != fence.ResumeAt {
		return 0, err
	}
	return res.Offset, nil
}

// setCommitted orders the write of pr's bookmark, with the state changes
// in the same write if there are any, and returns what makes it durable.
// Called with o.mu held.
func (o *Owner) setCommitted(pr *progress, b Bookmark, changes ...StateChange) (Durable, error) {
	var t Ticket
	var err error
	if len(changes) > 0 {
		t, err = o.log.SetBookmarkState(pr.key, b, changes)
	} else {
		t, err = o.log.SetBookmark(pr.key, b)
	}
	if err != nil {
		return Durable{}, err
	}
	pr.committed, pr.hasCommitted, pr.loaded = b, true, true
	return Durable{meta: o.meta, ticket: t}, nil
}

// Durable is the second half of an effect the owner ordered: the wait for
// its durability per the policy that governs it (the topic's durability
// for appends, the metadata sync for bookmarks). The owner orders effects
// under its lock and returns a Durable; the caller waits outside the lock,
// and acknowledges the effect only once Wait returned nil. The zero
// Durable has nothing to wait for.
//
// Durables of one partition complete in the order their effects were
// ordered, and waiting for one never delays the ordering of the next: a
// server may order request N+1 while request N waits.
type Durable struct {
	log    PartitionLog // with off: every offset <= off durable
	off    uint64
	meta   Metadata // with ticket: every metadata write up to ticket durable
	ticket Ticket
}

// Wait returns once the effect is durable, or with the error that kept it
// from becoming durable (the partition failed, the disk is full: it may
// be lost), or with ctx's error (it may still become durable).
func (d Durable) Wait(ctx context.Context) error {
	if d.log != nil {
		if err := d.log.WaitDurable(ctx, d.off); err != nil {
			return err
		}
	}
	if d.meta != nil {
		return d.meta.Sync(ctx, d.ticket)
	}
	return nil
}

// LogDurable is the durability of the records of log up to off: what a
// reply deferred to the log waits for.
func LogDurable(log PartitionLog, off uint64) Durable { return Durable{log: log, off: off} }

// LogOnly returns the log and offset d waits for when d has no metadata
// to sync; ok is false otherwise.
func (d Durable) LogOnly() (log PartitionLog, off uint64, ok bool) {
	return d.log, d.off, d.meta == nil
}

// Now reports whether d is durable already, without waiting. Only a log
// is asked (a probe must not start a metadata sync): an effect with
// metadata is reported as not durable yet.
func (d Durable) Now() bool {
	if d.meta != nil {
		return false
	}
	if d.log == nil {
		return true
	}
	return d.log.WaitDurable(endedContext, d.off) == nil
}

// endedContext is a context that has ended: a wait given it only reports
// what holds already. One for all, as an ended context never changes.
var endedContext = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Lineage returns how each history epoch of the partition began, in
// epoch order, ending with the current one.
func (o *Owner) Lineage() []fence.HistoryTransition { return o.log.Lineage() }

// Index returns the partition's index in its topic.
func (o *Owner) Index() uint32 { return o.index }

func produceRequest(h record.BatchHeader) fence.ProduceRequest {
	return fence.ProduceRequest{
		Producer:     fence.ProducerID(h.ProducerID),
		Epoch:        fence.ProducerEpoch(h.ProducerEpoch),
		BaseSequence: h.BaseSequence,
		Count:        int32(h.RecordCount),
	}
}
