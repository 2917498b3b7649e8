package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// ErrNotAssigned: a commit of a record whose partition the member does
// not hold under the assignment the record was polled in (it was revoked
// or lost since). Nothing was sent; do not retry.
var ErrNotAssigned = errors.New("sdk: the member does not hold the record's partition under the assignment it was polled in")

type groupPoll struct {
	parts []*heldPartition // in request order
	done  chan pollResult
}

// Poll carries out what the node asked of the member — rejoin after a
// fence, give up revoked partitions, take new ones, with their callbacks —
// then reads the next records of the partitions it holds. Under
// AtLeastOnce it first commits what the previous Poll returned.
//
// Poll may return records and an error together (one partition failed,
// others delivered): process the records, then look at the error. When
// the member holds no partition, Poll waits up to WithGroupMaxWait for an
// assignment and returns nothing. When ctx ends first, the records of a
// poll still on its way are returned by the next Poll.
func (g *GroupConsumer) Poll(ctx context.Context) ([]*Record, error) {
	g.pollMu.Lock()
	defer g.pollMu.Unlock()
	if g.isClosed() {
		return nil, ErrClosed
	}
	inflight := g.inflight
	g.inflight = nil
	var errs []error
	if inflight == nil {
		if err := g.reconcile(ctx); err != nil {
			return nil, err
		}
		if g.cfg.delivery == AtLeastOnce {
			if err := g.commitPending(ctx, nil); err != nil {
				errs = append(errs, err)
			}
		}
		var err error
		if inflight, err = g.sendPoll(ctx); err != nil || inflight == nil {
			return nil, errors.Join(append(errs, err)...)
		}
	}
	limit := time.NewTimer(g.cfg.maxWait + g.b.requestTimeout())
	defer limit.Stop()
	var res pollResult
	select {
	case res = <-inflight.done:
	case <-ctx.Done():
		g.inflight = inflight
		return nil, context.Cause(ctx)
	case <-limit.C:
		g.abortStream()
		res = <-inflight.done
	}
	if res.err != nil {
		g.abortStream()
		return nil, errors.Join(append(errs, transportError("poll", res.err))...)
	}
	var reply wire.PollReply
	if err := decodeReply(res.raw, &reply); err != nil {
		err = nodeError("poll", "", -1, err)
		g.noteMemberFence(err)
		return nil, errors.Join(append(errs, err)...)
	}
	frame := &pollFrame{buf: res.raw}
	recs, err := g.deliver(ctx, inflight, &reply, frame)
	if len(recs) == 0 {
		frame.recycle() // nothing aliases it
	}
	return recs, errors.Join(append(errs, err)...)
}

func (g *GroupConsumer) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// noteMemberFence marks the member for rejoining when err says the node
// no longer knows it.
func (g *GroupConsumer) noteMemberFence(err error) {
	if isRejoin(err) {
		g.mu.Lock()
		if g.fenced == nil {
			g.fenced = err
		}
		g.mu.Unlock()
	}
}

// reconcile brings the member's partitions to what the node said last:
// after a fence, every partition is lost and the member rejoins; a
// partition the node no longer lists is committed (AtLeastOnce), revoked
// and released; a new one (or one lost and assigned again) is taken.
func (g *GroupConsumer) reconcile(ctx context.Context) error {
	g.mu.Lock()
	if g.fenced != nil {
		var lost []TopicPartition
		for tp, hp := range g.parts {
			if !hp.blocked {
				lost = append(lost, tp)
			}
		}
		clear(g.parts)
		why := g.fenced
		g.mu.Unlock()
		sortTPs(lost)
		g.log.Info("member fenced; rejoining", "group", g.group, "lost", len(lost), "reason", why)
		if g.cfg.onLost != nil && len(lost) > 0 {
			g.cfg.onLost(ctx, lost)
		}
		if err := g.join(ctx); err != nil {
			return err
		}
		g.mu.Lock()
	}
	want := map[TopicPartition]wire.AssignedPartition{}
	for _, a := range g.latest.Assignment {
		want[TopicPartition{Topic: a.Topic, Partition: int32(a.Partition)}] = a
	}
	var revoked, released []TopicPartition
	for tp, hp := range g.parts {
		a, keep := want[tp]
		if keep && a.AssignmentEpoch == hp.assignment && a.TopicID == hp.topicID {
			continue
		}
		if hp.blocked {
			released = append(released, tp)
		} else {
			revoked = append(revoked, tp)
		}
	}
	g.mu.Unlock()
	sortTPs(revoked)
	if len(revoked) > 0 {
		var err error
		if g.cfg.delivery == AtLeastOnce {
			err = g.commitPending(ctx, revoked)
		}
		if g.cfg.onRevoked != nil {
			g.cfg.onRevoked(ctx, revoked)
		}
		if err != nil {
			g.log.Warn("commit before revocation failed", "group", g.group, "err", err)
		}
	}
	g.mu.Lock()
	for _, tp := range append(revoked, released...) {
		delete(g.parts, tp)
	}
	var assigned []TopicPartition
	for tp, a := range want {
		if _, held := g.parts[tp]; held {
			continue
		}
		g.parts[tp] = &heldPartition{
			tp: tp, topicID: a.TopicID, assignment: a.AssignmentEpoch,
			cur: &cursor{partition: tp.Partition, pos: AtCommitted()},
		}
		assigned = append(assigned, tp)
	}
	g.mu.Unlock()
	if len(revoked)+len(released) > 0 {
		g.heartbeatNow() // confirm at once: the partitions can move
	}
	if len(assigned) > 0 {
		sortTPs(assigned)
		if g.cfg.onAssigned != nil {
			g.cfg.onAssigned(ctx, assigned)
		}
	}
	return nil
}

// sendPoll sends a poll of every partition the member reads, or, holding
// none, waits for news from the heartbeat loop and returns nil.
func (g *GroupConsumer) sendPoll(ctx context.Context) (*groupPoll, error) {
	g.mu.Lock()
	req := &wire.PollRequest{
		Consumer: g.who, MaxWait: g.cfg.maxWait, MaxBytes: uint32(g.cfg.maxBytes),
		MaxMessages: uint32(g.cfg.maxMessages), Key: g.cfg.key,
	}
	req.Consumer.MemberEpoch = g.latest.MemberEpoch
	if g.cfg.delivery == AtMostOnce {
		req.AutoCommit = wire.AutoCommitOnDelivery
	}
	p := &groupPoll{done: make(chan pollResult, 1)}
	for _, hp := range g.parts {
		if !hp.blocked {
			p.parts = append(p.parts, hp)
		}
	}
	slices.SortFunc(p.parts, func(a, b *heldPartition) int {
		s := []TopicPartition{a.tp, b.tp}
		sortTPs(s)
		if s[0] == a.tp {
			return -1
		}
		return 1
	})
	for _, hp := range p.parts {
		req.Partitions = append(req.Partitions, wire.PollPartition{
			Topic: hp.tp.Topic, TopicID: hp.topicID, Partition: uint32(hp.tp.Partition), Position: hp.cur.pos.wire(g.cfg.reset),
		})
	}
	changed := g.changed
	g.mu.Unlock()
	if len(p.parts) == 0 {
		t := time.NewTimer(g.cfg.maxWait)
		defer t.Stop()
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return nil, nil
	}
	if g.stream == nil {
		st, _, err := g.b.openStream(ctx, 1)
		if err != nil {
			return nil, err
		}
		g.stream = st
	}
	frame, err := wire.AppendRequest(nil, g.b.nextID(), req)
	if err != nil {
		return nil, nodeError("poll", "", -1, err)
	}
	if err := g.stream.Send(ctx, frame, func(raw []byte, err error) { p.done <- pollResult{raw, err} }); err != nil {
		g.abortStream()
		return nil, transportError("poll", err)
	}
	return p, nil
}

func (g *GroupConsumer) abortStream() {
	if g.stream == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.stream.Close(ctx)
	g.stream = nil
}

// deliver turns a poll reply into records. A partition refused as fenced
// is lost: what was pending is dropped and it is blocked until assigned
// again; a stale history resumes from the committed offset.
func (g *GroupConsumer) deliver(ctx context.Context, p *groupPoll, reply *wire.PollReply, frame *pollFrame) ([]*Record, error) {
	if len(reply.Partitions) != len(p.parts) {
		return nil, fmt.Errorf("sdk: poll group %s: %d partitions in the reply, %d asked", g.group, len(reply.Partitions), len(p.parts))
	}
	var (
		out  []*Record
		errs []error
		lost []TopicPartition
	)
	g.mu.Lock()
	for i := range reply.Partitions {
		rp := &reply.Partitions[i]
		hp := p.parts[i]
		if g.parts[hp.tp] != hp || hp.blocked {
			continue // revoked or lost since the poll was sent
		}
		err := statusError("poll", hp.tp.Topic, uint32(hp.tp.Partition), rp.Status, rp.Message)
		switch {
		case err == nil:
		case isRejoin(err):
			if g.fenced == nil {
				g.fenced = err
			}
			continue
		case isMemberFence(err):
			hp.blocked, hp.pending = true, nil
			lost = append(lost, hp.tp)
			continue
		case rp.Status == wire.StatusStaleHistory:
			hp.pending, hp.cur.last, hp.cur.pos = nil, nil, AtCommitted()
			continue
		case rp.Status.IsPlugin():
			// The filter failed: the application hears of it, whatever
			// the class (a retryable busy plugin included).
			errs = append(errs, err)
			continue
		case rp.Status.RetryClass() == wire.ClassRetry:
			continue
		default:
			errs = append(errs, err)
			continue
		}
		recs, err := decodePollPartition(hp.tp.Topic, hp.cur, rp, frame)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(recs) > 0 && g.cfg.delivery == AtLeastOnce {
			hp.pending = hp.cur.last
		}
		out = appendRecords(out, recs)
	}
	g.mu.Unlock()
	g.loseSome(ctx, lost)
	return out, errors.Join(errs...)
}

// loseSome reports partitions lost one by one (fenced work).
func (g *GroupConsumer) loseSome(ctx context.Context, lost []TopicPartition) {
	if len(lost) == 0 {
		return
	}
	sortTPs(lost)
	g.log.Info("partitions fenced; waiting to be assigned again", "group", g.group, "partitions", lost)
	if g.cfg.onLost != nil {
		g.cfg.onLost(ctx, lost)
	}
}

// Commit commits, for each partition among recs, the position after its
// highest record, with the fence token of the poll that returned it. A
// record of a partition the member no longer holds under the assignment
// it was polled in is not sent: ErrNotAssigned. A refusal as fenced drops
// what was pending for the partition and blocks it until the node assigns
// it again (OnLost is called).
func (g *GroupConsumer) Commit(ctx context.Context, recs ...*Record) error {
	if g.isClosed() {
		return ErrClosed
	}
	best := map[TopicPartition]*Record{}
	for _, r := range recs {
		if r.poll == nil {
			return fmt.Errorf("sdk: commit: record %s/%d@%d was not returned by a Poll", r.Topic, r.Partition, r.Offset)
		}
		tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if b, ok := best[tp]; !ok || r.Offset > b.Offset {
			best[tp] = r
		}
	}
	var offsets []wire.CommitOffset
	var errs []error
	tps := make([]TopicPartition, 0, len(best))
	for tp := range best {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	g.mu.Lock()
	for _, tp := range tps {
		r := best[tp]
		hp := g.parts[tp]
		if hp == nil || hp.blocked || !pollOf(hp, r.poll) {
			errs = append(errs, fmt.Errorf("sdk: commit %s/%d: %w", tp.Topic, tp.Partition, ErrNotAssigned))
			continue
		}
		if hp.pending != nil && hp.pending.next <= r.Offset+1 {
			hp.pending = nil
		}
		offsets = append(offsets, wire.CommitOffset{Topic: tp.Topic, Partition: uint32(tp.Partition), Offset: r.Offset + 1, Token: r.poll.token})
	}
	g.mu.Unlock()
	return errors.Join(append(errs, g.commit(ctx, offsets))...)
}

// pollOf reports whether pp was delivered under hp's assignment.
func pollOf(hp *heldPartition, pp *pollPartition) bool {
	tok, err := fence.UnmarshalToken(pp.token)
	return err == nil && uint64(tok.AssignmentEpoch) == hp.assignment
}

// CommitPolled commits everything the latest poll of each partition the
// member holds delivered, with its token.
func (g *GroupConsumer) CommitPolled(ctx context.Context) error {
	if g.isClosed() {
		return ErrClosed
	}
	return g.commitPending(ctx, nil)
}

// commitPending commits what is pending on the partitions only (all, when
// only is nil).
func (g *GroupConsumer) commitPending(ctx context.Context, only []TopicPartition) error {
	var offsets []wire.CommitOffset
	g.mu.Lock()
	tps := make([]TopicPartition, 0, len(g.parts))
	for tp := range g.parts {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	for _, tp := range tps {
		hp := g.parts[tp]
		if hp.pending == nil || hp.blocked || hp.stateful || only != nil && !slices.Contains(only, tp) {
			continue
		}
		if hp.pending.next > hp.pending.from {
			offsets = append(offsets, wire.CommitOffset{Topic: tp.Topic, Partition: uint32(tp.Partition), Offset: hp.pending.next, Token: hp.pending.token})
		}
		hp.pending = nil
	}
	g.mu.Unlock()
	return g.commit(ctx, offsets)
}

// commit sends commits and handles their refusals.
func (g *GroupConsumer) commit(ctx context.Context, offsets []wire.CommitOffset) error {
	if len(offsets) == 0 {
		return nil
	}
	g.mu.Lock()
	who := g.who
	who.MemberEpoch = g.latest.MemberEpoch
	g.mu.Unlock()
	var reply wire.CommitReply
	if err := g.b.call(ctx, &wire.CommitRequest{Consumer: who, Offsets: offsets}, &reply); err != nil {
		g.noteMemberFence(err)
		return err
	}
	var errs []error
	var lost []TopicPartition
	g.mu.Lock()
	for i, r := range reply.Partitions {
		if i >= len(offsets) {
			break
		}
		o := offsets[i]
		err := statusError("commit", o.Topic, o.Partition, r.Status, r.Message)
		if err == nil {
			continue
		}
		errs = append(errs, err)
		tp := TopicPartition{Topic: o.Topic, Partition: int32(o.Partition)}
		switch hp := g.parts[tp]; {
		case isRejoin(err):
			if g.fenced == nil {
				g.fenced = err
			}
		case isMemberFence(err) && hp != nil && !hp.blocked && tokenAssignment(o.Token) == hp.assignment:
			// The member's view of the partition is stale: drop what is
			// pending, commit nothing more until it is assigned again.
			hp.blocked, hp.pending = true, nil
			lost = append(lost, tp)
		case errors.Is(err, fence.ErrStaleHistory) && hp != nil:
			hp.pending, hp.cur.last, hp.cur.pos = nil, nil, AtCommitted()
		}
	}
	g.mu.Unlock()
	g.loseSome(ctx, lost)
	return errors.Join(errs...)
}

func tokenAssignment(b []byte) uint64 {
	tok, err := fence.UnmarshalToken(b)
	if err != nil {
		return 0
	}
	return uint64(tok.AssignmentEpoch)
}

// Unpoll gives back records a Poll returned that the application will not
// process: on each of their partitions, what is pending is not committed
// by the next Poll or by Close, and the partition is read again from the
// lowest offset among them. Commit what was processed first. Records of
// partitions the member no longer holds under the assignment they were
// polled in are ignored.
func (g *GroupConsumer) Unpoll(recs ...*Record) {
	lowest := map[TopicPartition]uint64{}
	for _, r := range recs {
		tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if low, ok := lowest[tp]; !ok || r.Offset < low {
			lowest[tp] = r.Offset
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range recs {
		tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
		hp := g.parts[tp]
		if hp == nil || hp.blocked || r.poll == nil || !pollOf(hp, r.poll) {
			continue
		}
		hp.pending, hp.cur.last, hp.cur.pos = nil, nil, AtOffset(lowest[tp])
	}
}
