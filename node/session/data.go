package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/pluginreg"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// Handlers of produce and consume. Every one goes through the partition
// owner: nothing here changes a log or a consumer's progress around it.

// partitionOf returns the topic and owner a request names.
func (r *Call) partitionOf(name string, id [16]byte, p uint32) (*Topic, *owner.Owner, error) {
	t, err := r.s.n.Lookup(name, id)
	if err != nil {
		return nil, nil, err
	}
	o, err := t.Owner(p)
	if err != nil {
		return nil, nil, err
	}
	return t, o, nil
}

func (r *Call) Produce(ctx context.Context, m *wire.ProduceRequest) (*wire.ProduceReply, error) {
	if err := r.allow(m.Topic, wire.ScopeProduce); err != nil {
		return nil, err
	}
	t, o, err := r.partitionOf(m.Topic, m.TopicID, m.Partition)
	if err != nil {
		return nil, err
	}
	if limit := int(t.Config.MaxBatchBytes); limit > 0 && len(m.Batch) > limit {
		return nil, fmt.Errorf("%w: %d bytes, topic %s takes at most %d", record.ErrBatchTooLarge, len(m.Batch), t.Name, limit)
	}
	// The batch is appended in the stream's order; the stream's next
	// request starts while this one waits for durability.
	res, d, err := o.OrderProduceOwned(ctx, m.Batch, r.shareFrame())
	if err != nil {
		return nil, topicError(t, err)
	}
	if err := r.durableIn(ctx, t, d); err != nil {
		return nil, err
	}
	rep := &r.scratch.produce
	*rep = wire.ProduceReply{
		BaseOffset: res.Base, LastOffset: res.Last, AppendTime: res.AppendTime, Duplicate: res.Duplicate,
	}
	return rep, nil
}

// callScratch is the memory a call's handlers reuse from one request to
// the next, when the transport reuses its calls (Call.Init): a produce's
// reply, a poll's reply, plan and tokens. What a handler returns in it
// is valid until the call's next Init, by when the transport has written
// the reply; a call made for one request (Session's methods) uses it once.
type callScratch struct {
	produce wire.ProduceReply
	poll    wire.PollReply
	plan    pollPlan
	results []owner.PartitionResult
	tokens  []byte // the poll reply's tokens, back to back
}

// maxKeptPartitions bounds the poll partitions whose memory a call keeps
// for its next request.
const maxKeptPartitions = 64

// pollReply is the call's poll reply of n partitions, zeroed.
func (s *callScratch) pollReply(n int) *wire.PollReply {
	if cap(s.poll.Partitions) > maxKeptPartitions {
		s.poll.Partitions = nil
	}
	s.poll.Partitions = slices.Grow(s.poll.Partitions[:0], n)[:n]
	clear(s.poll.Partitions)
	return &s.poll
}

// keepPlan keeps plan's memory, and the results', for the call's next
// poll, holding nothing of this one.
func (s *callScratch) keepPlan(plan pollPlan) {
	if cap(plan.polls) > maxKeptPartitions {
		s.plan, s.results = pollPlan{}, nil
		return
	}
	clear(plan.polls)
	clear(plan.topics)
	s.plan = pollPlan{polls: plan.polls[:0], where: plan.where[:0], topics: plan.topics[:0]}
	clear(s.results)
	s.results = s.results[:0]
}

// shareFrame shares the bytes the request was read into, which hold the
// batch, with the storage engine, when its transport can (nil: the engine
// copies the batch).
func (r *Call) shareFrame() func() {
	if r.share == nil {
		return nil
	}
	return r.share.ShareFrame()
}

// InitProducer registers a producer incarnation: the next epoch of a
// named producer; for an unnamed one, a fresh id (producer id 0) or the
// next epoch of the id it states (Producers.Reinit).
func (r *Call) InitProducer(ctx context.Context, m *wire.InitProducerRequest) (*wire.InitProducerReply, error) {
	if err := r.allow("", wire.ScopeProduce); err != nil {
		return nil, err
	}
	var id owner.ProducerIdentity
	var err error
	if m.Name == "" && m.ProducerID != 0 {
		id, err = r.s.n.Producers().Reinit(ctx, fence.ProducerID(m.ProducerID), fence.ProducerEpoch(m.ProducerEpoch))
	} else {
		id, err = r.s.n.Producers().Init(ctx, m.Name)
	}
	if err != nil {
		return nil, err
	}
	return &wire.InitProducerReply{ProducerID: uint64(id.ID), ProducerEpoch: uint32(id.Epoch)}, nil
}

// AttachConsumer starts a session under a consumer name. Sessions are
// node-wide (Sessions): the topic, when the request names one, is checked
// for the consume scope and its id is returned.
func (r *Call) AttachConsumer(ctx context.Context, m *wire.AttachConsumerRequest) (*wire.AttachConsumerReply, error) {
	if err := r.allow(m.Topic, wire.ScopeConsume); err != nil {
		return nil, err
	}
	if m.Name == "" {
		return nil, invalidArgument("attach needs a consumer name")
	}
	rep := &wire.AttachConsumerReply{}
	if m.Topic != "" {
		t, err := r.s.n.Lookup(m.Topic, [16]byte{})
		if err != nil {
			return nil, err
		}
		rep.TopicID = t.ID
	}
	e, err := r.s.n.Consumers().Attach(ctx, m.Name)
	if err != nil {
		return nil, err
	}
	rep.Session = uint64(e)
	return rep, nil
}

// consumerOf maps the wire's consumer to the owner's.
func consumerOf(c wire.Consumer) (owner.Consumer, error) {
	switch c.Kind {
	case wire.ConsumerAnonymous:
		return owner.Consumer{}, nil
	case wire.ConsumerNamed:
		if c.Name == "" {
			return owner.Consumer{}, invalidArgument("a named consumer needs a name")
		}
		return owner.Consumer{Name: c.Name, Session: fence.SessionEpoch(c.Session)}, nil
	case wire.ConsumerMember:
		if c.Name == "" || c.MemberID == "" {
			return owner.Consumer{}, invalidArgument("a group member needs a group name and a member id")
		}
		return owner.Consumer{Name: c.Name, Member: c.MemberID, MemberEpoch: fence.MemberEpoch(c.MemberEpoch)}, nil
	}
	return owner.Consumer{}, invalidArgument(fmt.Sprintf("consumer kind %d", c.Kind))
}

// pollRequest maps one partition of a wire poll to an owner poll. The
// partition's state now applies a reset policy to an explicit offset
// outside the log, and its time index resolves a timestamp (the owner
// re-checks the resulting position).
func pollRequest(ctx context.Context, c owner.Consumer, pos wire.Position, log owner.PartitionLog) (owner.PollRequest, error) {
	req := owner.PollRequest{Consumer: c}
	switch pos.Mode {
	case wire.PositionOffset, wire.PositionTimestamp:
		req.From, req.Offset = owner.FromOffset, pos.Offset
		if pos.Mode == wire.PositionTimestamp {
			off, err := owner.OffsetForTime(ctx, log, pos.Timestamp)
			if err != nil {
				return req, err
			}
			req.Offset = off
		}
		st := log.State()
		if fence.CheckPosition(fence.Partition{LogStart: st.LogStart, HighWatermark: st.HighWatermark}, req.Offset) != nil {
			switch pos.Reset {
			case wire.PositionFirst:
				req.From = owner.FromFirst
			case wire.PositionEnd:
				req.From = owner.FromEnd
			}
		}
	case wire.PositionFirst:
		req.From = owner.FromFirst
	case wire.PositionLast:
		req.From = owner.FromLast
	case wire.PositionEnd:
		req.From = owner.FromEnd
	case wire.PositionNext:
		if c.Name == "" {
			return req, invalidArgument("position next needs a named consumer")
		}
		req.From = owner.FromNext
		switch pos.Reset {
		case wire.PositionFirst:
			req.Reset = owner.ResetEarliest
		case wire.PositionEnd:
			req.Reset = owner.ResetLatest
		default:
			req.Reset = owner.ResetNone
		}
	default:
		return req, invalidArgument(fmt.Sprintf("position %s", pos.Mode))
	}
	return req, nil
}

func autoCommitOf(a wire.AutoCommit) owner.AutoCommit {
	switch a {
	case wire.AutoCommitOnDelivery:
		return owner.AutoCommitOnDelivery
	case wire.AutoCommitOnNextPoll:
		return owner.AutoCommitOnNextPoll
	}
	return owner.AutoCommitOff
}

// Poll reads one or several partitions through their owners (PollMany).
// A long poll holds a parked-poll slot; past MaxParkedPolls it is answered
// at once, with StatusBusy if it found nothing. Partitions answer on their
// own: one partition's error does not fail the others.
func (r *Call) Poll(ctx context.Context, m *wire.PollRequest) (*wire.PollReply, error) {
	filter, err := r.s.n.Plugins().FilterOf(ctx, m.Filter, min(m.MaxWait, r.s.n.Limits().MaxPollWait))
	if err != nil {
		return nil, err
	}
	c, err := r.pollConsumer(m)
	if err != nil {
		return nil, err
	}
	rep := r.scratch.pollReply(len(m.Partitions))
	plan := r.planPoll(ctx, m, c, filter, rep)
	defer r.scratch.keepPlan(plan)
	if len(plan.polls) == 0 {
		return rep, nil
	}

	n := r.s.n
	wait := min(m.MaxWait, n.Limits().MaxPollWait)
	parked := n.Park(wait)
	if parked {
		defer n.Unpark()
	}
	overLimit := wait > 0 && !parked
	if !parked {
		wait = 0 // at the limit, the poll does not wait
	}
	found := r.replyPoll(ctx, m, c, filter != nil || m.Key.Mode != wire.KeyAny, plan, r.pollPlanned(ctx, plan, filter != nil, wait), rep)
	if overLimit && !found {
		return nil, fmt.Errorf("%w: %d long polls are parked already; poll again later", ErrBusy, n.Limits().MaxParkedPolls)
	}
	return rep, nil
}

// pollPlanned runs the planned polls, waiting up to wait; the node's
// shutdown and the deletion of a topic polled end the wait. A poll of one
// topic without a filter (a device's) waits on those two directly
// (owner.PollManyUntil); others through a context canceled by them.
func (r *Call) pollPlanned(ctx context.Context, plan pollPlan, filtered bool, wait time.Duration) []owner.PartitionResult {
	n := r.s.n
	if t, ok := oneTopic(plan.topics); ok && t != nil && !filtered {
		res := owner.PollManyUntil(ctx, plan.polls, wait, owner.Interrupts{n.Draining().Done(), t.gone.Done()}, r.scratch.results)
		r.scratch.results = res
		return res
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, stop := range []func() bool{
		context.AfterFunc(n.Draining(), cancel),
		watchTopics(plan.topics, cancel),
	} {
		defer stop()
	}
	return pollKept(pctx, plan.polls, wait)
}

// pollConsumer checks what a poll asks before anything is read: at least
// one partition, a valid consumer, and the consume scope on every topic.
func (r *Call) pollConsumer(m *wire.PollRequest) (owner.Consumer, error) {
	if len(m.Partitions) == 0 {
		return owner.Consumer{}, invalidArgument("a poll needs at least one partition")
	}
	c, err := consumerOf(m.Consumer)
	if err != nil {
		return owner.Consumer{}, err
	}
	for i := range m.Partitions {
		if err := r.allow(m.Partitions[i].Topic, wire.ScopeConsume); err != nil {
			return owner.Consumer{}, err
		}
	}
	return c, nil
}

// pollPlan is a poll resolved into its owners' requests: polls[j] serves
// the poll's partition where[j]; topics[i] is the topic of partition i
// (nil where it does not exist).
type pollPlan struct {
	polls  []owner.PartitionPoll
	where  []int
	topics []*Topic
}

// planPoll resolves each partition of a poll into its owner's request,
// sharing the poll's byte and record budget out evenly. A partition that
// cannot be polled (unknown, refused position) gets its status in rep at
// once, and no request.
func (r *Call) planPoll(ctx context.Context, m *wire.PollRequest, c owner.Consumer, filter *pluginreg.Filter, rep *wire.PollReply) pollPlan {
	share, messages := r.pollShares(m)
	n, kept := len(m.Partitions), r.scratch.plan
	plan := pollPlan{
		polls:  slices.Grow(kept.polls[:0], n),
		where:  slices.Grow(kept.where[:0], n),
		topics: slices.Grow(kept.topics[:0], n)[:n],
	}
	for i := range m.Partitions {
		p, out := &m.Partitions[i], &rep.Partitions[i]
		t, o, err := r.partitionOf(p.Topic, p.TopicID, p.Partition)
		if err == nil {
			var req owner.PollRequest
			if req, err = pollRequest(ctx, c, p.Position, t.Logs[p.Partition]); err == nil {
				req.AutoCommit = autoCommitOf(m.AutoCommit)
				req.Key = owner.KeyMatch{Key: m.Key.Key, Prefix: m.Key.Mode == wire.KeyPrefix}
				req.MaxBytes, req.MaxMessages = share, messages
				if p.MaxBytes > 0 {
					req.MaxBytes = min(share, int(p.MaxBytes))
				}
				if filter != nil {
					req.Transform = filter.Transform(t.Name, p.Partition, int(t.Config.MaxBatchBytes))
				}
				plan.polls = append(plan.polls, owner.PartitionPoll{Owner: o, Request: req})
				plan.where = append(plan.where, i)
			}
		}
		plan.topics[i] = t
		if err != nil {
			out.Status, out.Message = StatusOf(err)
			fillState(out, t, p.Partition)
		}
	}
	return plan
}

// pollShares divides a poll's byte budget (bounded by the node's) and its
// record budget evenly among its partitions; 0 records bounds nothing.
func (r *Call) pollShares(m *wire.PollRequest) (share, messages int) {
	total := int(m.MaxBytes)
	if total == 0 {
		total = r.s.n.Limits().PollBytes
	}
	total = min(total, r.s.n.Limits().MaxPollBytes)
	share = max(total/len(m.Partitions), 1)
	if m.MaxMessages > 0 {
		messages = max(int(m.MaxMessages)/len(m.Partitions), 1)
	}
	return share, messages
}

// replyPoll fills rep with the results of the planned polls, applies the
// Commit policies to what was delivered, and keeps the delivered batches
// for the reply's writer. found says some partition delivered records.
func (r *Call) replyPoll(ctx context.Context, m *wire.PollRequest, c owner.Consumer, filtered bool, plan pollPlan, results []owner.PartitionResult, rep *wire.PollReply) (found bool) {
	r.polled = slices.Grow(r.polled, len(results))
	// The tokens share one buffer, grown once: each aliases its part.
	toks := slices.Grow(r.scratch.tokens[:0], len(results)*fence.TokenSize)
	defer func() { r.scratch.tokens = toks[:0] }()
	for j, res := range results {
		i := plan.where[j]
		p, out, t := &m.Partitions[i], &rep.Partitions[i], plan.topics[i]
		if res.Err != nil {
			out.Status, out.Message = StatusOf(r.pollError(ctx, t, res.Err))
			fillState(out, t, p.Partition)
			continue
		}
		found = found || len(res.Result.Batches) > 0
		r.polled = append(r.polled, res.Result)
		r.applyPolicy(ctx, plan.polls[j].Owner, c, t.Name, p.Partition, res.Result)
		at := len(toks)
		toks, _ = res.Result.Token.AppendBinary(toks)
		tok := toks[at:len(toks):len(toks)]
		st := res.Result.State
		*out = wire.PollPartitionReply{
			TopicID: t.ID, History: uint64(st.History), StartOffset: st.LogStart, HighWatermark: st.HighWatermark,
			Next: res.Result.Next, Token: tok, Payload: wire.PayloadStored, BatchParts: res.Result.Batches,
		}
		if filtered {
			out.Payload = wire.PayloadFiltered
		}
	}
	return found
}

// pollError says why a partition of a poll failed. A poll interrupted by
// the node (a shutdown, or the deletion of a topic it covers) says so
// rather than "canceled".
func (r *Call) pollError(ctx context.Context, t *Topic, err error) error {
	switch {
	case t.Deleted():
		return fmt.Errorf("%w: %q", ErrTopicDeleted, t.Name)
	case !errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return err
	case r.s.n.Draining().Err() != nil:
		return ErrShuttingDown
	}
	return fmt.Errorf("%w: the poll was interrupted by the deletion of another topic it covers; poll again", context.DeadlineExceeded)
}

// watchTopics calls cancel when any of the topics is deleted; the returned
// function stops watching.
func watchTopics(topics []*Topic, cancel context.CancelFunc) func() bool {
	if t, ok := oneTopic(topics); ok { // a device's poll: no list to keep
		if t == nil {
			return func() bool { return true }
		}
		return context.AfterFunc(t.gone, cancel)
	}
	var stops []func() bool
	seen := map[*Topic]bool{}
	for _, t := range topics {
		if t != nil && !seen[t] {
			seen[t] = true
			stops = append(stops, context.AfterFunc(t.gone, cancel))
		}
	}
	return func() bool {
		for _, s := range stops {
			s()
		}
		return true
	}
}

// oneTopic returns the one topic of topics (nil: none) and true, or false
// when they are several.
func oneTopic(topics []*Topic) (*Topic, bool) {
	var one *Topic
	for _, t := range topics {
		switch {
		case t == nil || t == one:
		case one == nil:
			one = t
		default:
			return nil, false
		}
	}
	return one, true
}

// fillState puts what is known of the partition into a failed poll entry.
func fillState(out *wire.PollPartitionReply, t *Topic, p uint32) {
	if t == nil {
		return
	}
	out.TopicID = t.ID
	if p < uint32(len(t.Logs)) {
		st := t.Logs[p].State()
		out.History, out.StartOffset, out.HighWatermark = uint64(st.History), st.LogStart, st.HighWatermark
	}
}

// Commit orders each partition's commit through its owner, lets the
// stream's next request start, then waits for the commits to be durable
// (they share their metadata syncs).
func (r *Call) Commit(ctx context.Context, m *wire.CommitRequest) (*wire.CommitReply, error) {
	c, err := r.progressConsumer(m.Consumer, "commits")
	if err != nil {
		return nil, err
	}
	for i := range m.Offsets {
		if err := r.allow(m.Offsets[i].Topic, wire.ScopeConsume); err != nil {
			return nil, err
		}
	}
	rep := &wire.CommitReply{Partitions: make([]wire.OffsetResult, len(m.Offsets))}
	steps := make([]offsetStep, len(m.Offsets))
	for i := range m.Offsets {
		o, st := &m.Offsets[i], &steps[i]
		st.t, st.o, st.err = r.partitionOf(o.Topic, [16]byte{}, o.Partition)
		if st.err == nil {
			var tok fence.Token
			if tok, st.err = fence.UnmarshalToken(o.Token); st.err == nil {
				st.d, st.err = st.o.OrderCommit(ctx, owner.CommitRequest{Consumer: c, Token: tok, Offset: o.Offset})
			}
		}
		st.offset = o.Offset
	}
	err = r.durable(ctx, func(ctx context.Context) error {
		for i := range steps {
			r.finishOffset(ctx, c, &steps[i], &rep.Partitions[i])
		}
		return nil
	})
	return rep, err
}

// offsetStep is one partition of a commit or reset: its owner, what it
// ordered and the offset it commits.
type offsetStep struct {
	t      *Topic
	o      *owner.Owner
	d      owner.Durable
	offset uint64
	err    error
}

// finishOffset waits for an ordered commit or reset to be durable and
// fills its result: the committed offset, or the error and the offset
// committed before.
func (r *Call) finishOffset(ctx context.Context, c owner.Consumer, st *offsetStep, out *wire.OffsetResult) {
	err := st.err
	if err == nil {
		err = st.d.Wait(ctx)
	}
	if err == nil {
		out.Offset = st.offset
		return
	}
	if st.t != nil {
		err = topicError(st.t, err)
	}
	out.Status, out.Message = StatusOf(err)
	if st.o != nil {
		out.Offset = committedOffset(ctx, st.o, c)
	}
}

// progressConsumer maps the consumer of a request that needs progress
// kept: a named consumer.
func (r *Call) progressConsumer(wc wire.Consumer, what string) (owner.Consumer, error) {
	c, err := consumerOf(wc)
	if err == nil && c.Name == "" {
		err = invalidArgument(what + " need a named consumer")
	}
	return c, err
}

// committedOffset is the consumer's committed offset, or 0 when it has
// none (or it cannot be read now).
func committedOffset(ctx context.Context, o *owner.Owner, c owner.Consumer) uint64 {
	p, err := o.Committed(ctx, c)
	if err != nil || !p.HasCommitted {
		return 0
	}
	return p.Committed.Offset
}

// ResetPosition orders each partition's reset through its owner, lets
// the stream's next request start, then waits for the resets to be
// durable.
func (r *Call) ResetPosition(ctx context.Context, m *wire.ResetPositionRequest) (*wire.ResetPositionReply, error) {
	c, err := r.progressConsumer(m.Consumer, "resets")
	if err != nil {
		return nil, err
	}
	for i := range m.Partitions {
		if err := r.allow(m.Partitions[i].Topic, wire.ScopeConsume); err != nil {
			return nil, err
		}
	}
	rep := &wire.ResetPositionReply{Partitions: make([]wire.OffsetResult, len(m.Partitions))}
	steps := make([]offsetStep, len(m.Partitions))
	for i := range m.Partitions {
		p, st := &m.Partitions[i], &steps[i]
		st.t, st.o, st.err = r.partitionOf(p.Topic, [16]byte{}, p.Partition)
		if st.err == nil {
			if st.offset, st.err = resolvePosition(ctx, p.Position, st.t.Logs[p.Partition]); st.err == nil {
				var tok fence.Token
				if tok, st.err = fence.UnmarshalToken(p.Token); st.err == nil {
					st.d, st.err = st.o.OrderReset(ctx, owner.CommitRequest{Consumer: c, Token: tok, Offset: st.offset})
				}
			}
		}
	}
	err = r.durable(ctx, func(ctx context.Context) error {
		for i := range steps {
			r.finishOffset(ctx, c, &steps[i], &rep.Partitions[i])
		}
		return nil
	})
	return rep, err
}

// resolvePosition turns a reset's position into an offset. The owner
// checks it against the log again when it applies the reset.
func resolvePosition(ctx context.Context, pos wire.Position, log owner.PartitionLog) (uint64, error) {
	st := log.State()
	switch pos.Mode {
	case wire.PositionOffset:
		return pos.Offset, nil
	case wire.PositionFirst:
		return st.LogStart, nil
	case wire.PositionEnd:
		return st.HighWatermark, nil
	case wire.PositionLast:
		if st.HighWatermark > st.LogStart {
			return st.HighWatermark - 1, nil
		}
		return st.HighWatermark, nil
	case wire.PositionTimestamp:
		return owner.OffsetForTime(ctx, log, pos.Timestamp)
	}
	return 0, invalidArgument(fmt.Sprintf("a reset cannot use position %s", pos.Mode))
}

func (r *Call) GetCommitted(ctx context.Context, m *wire.GetCommittedRequest) (*wire.GetCommittedReply, error) {
	c, err := r.progressConsumer(m.Consumer, "committed offsets")
	if err != nil {
		return nil, err
	}
	for i := range m.Partitions {
		if err := r.allow(m.Partitions[i].Topic, wire.ScopeConsume); err != nil {
			return nil, err
		}
	}
	// A named consumer asked for without a session, once a process has
	// attached under the name, is looked at rather than acted as: its
	// committed offsets are read as they are, without a token.
	observer := c.Member == "" && c.Session == 0
	rep := &wire.GetCommittedReply{Partitions: make([]wire.Committed, len(m.Partitions))}
	for i := range m.Partitions {
		tp, out := &m.Partitions[i], &rep.Partitions[i]
		t, o, err := r.partitionOf(tp.Topic, [16]byte{}, tp.Partition)
		var p owner.Progress
		if err == nil {
			p, err = o.Committed(ctx, c)
			if observer && errors.Is(err, fence.ErrFencedSession) {
				p, err = o.ObserveCommitted(ctx, c.Name)
			}
		}
		if err != nil {
			if t != nil {
				err = topicError(t, err)
			}
			out.Status, out.Message = StatusOf(err)
			continue
		}
		tok, _ := p.Token.MarshalBinary()
		out.Token = tok
		if p.HasCommitted {
			out.HasOffset, out.Offset, out.History = true, p.Committed.Offset, uint64(p.Committed.History)
		}
	}
	return rep, nil
}
