package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// The members' actions. Each goes through the coordinator or the
// partition's owner exactly as a member's request would, with what the
// member believes (its epoch, the partitions it thinks it owns, the
// tokens of its polls), which may be stale: it learns of a fence only
// from a refusal.

func (w *World) member(id string) *simMember {
	for _, c := range w.gm.members {
		if c.id == id {
			return c
		}
	}
	panic("sim: no member " + id)
}

// join joins (again) under the member's id: a new incarnation that holds
// nothing.
func (w *World) join(c *simMember, assignor wire.GroupAssignor) string {
	gm := w.gm
	gm.used = true
	gm.act = groupAct{kind: "join", member: c.id}
	a, err := w.groups.Join(w.Ctx, group.JoinRequest{
		Group: simGroup, Member: c.id, Topics: w.names, Assignor: assignor,
		SessionTimeout: simSession, RebalanceTimeout: simRebalance,
	})
	gm.act = groupAct{}
	c.joined, c.paused, c.epoch = false, false, 0
	clear(c.owns)
	clear(c.procs)
	if err != nil {
		w.noteErr(err)
		return "join failed: " + errClass(err)
	}
	c.joined = true
	out := w.took(c, a, false, true)
	c.joinEpoch = c.epoch
	return "joined: " + out
}

// heartbeat sends a heartbeat with what the member owns. A slow member
// keeps working on partitions it is asked to give up (it still owns them
// in its next heartbeat); a prompt one commits what it has pending for
// them (sometimes) and gives them up. A fenced member drops everything
// and joins again.
func (w *World) heartbeat(c *simMember, slow bool) string {
	gm := w.gm
	owned := ownedList(c.owns)
	act := groupAct{kind: "heartbeat", member: c.id, owned: map[wire.TopicPartition]bool{}}
	for _, tp := range owned {
		act.owned[tp] = true
	}
	gm.act = act
	a, err := w.groups.Heartbeat(w.Ctx, group.HeartbeatRequest{Group: simGroup, Member: c.id, Epoch: c.epoch, Owned: owned})
	gm.act = groupAct{}
	if err != nil {
		if a, ok := fence.ActionOf(err); ok && a == fence.Rejoin {
			c.joined = false
			clear(c.owns)
			clear(c.procs)
			return errClass(err) + "; " + w.join(c, wire.AssignorDefault)
		}
		if _, ok := fence.CodeOf(err); ok {
			w.violate("heartbeat of %s refused with %v, which does not say to rejoin", c.id, err)
		}
		w.noteErr(err)
		return "failed: " + errClass(err)
	}
	return w.took(c, a, slow, false)
}

// took applies a join or heartbeat reply to the member, checking its
// epochs and that the owners were told what the member is.
func (w *World) took(c *simMember, a wire.MemberAssignment, slow, join bool) string {
	gm := w.gm
	e := fence.MemberEpoch(a.MemberEpoch)
	switch {
	case join && e <= gm.maxEpoch:
		w.violate("%s joined at epoch %d, not above every epoch handed out before (%d): a member epoch repeated", c.id, e, gm.maxEpoch)
	case !join && e < c.epoch:
		w.violate("%s: member epoch went back from %d to %d", c.id, c.epoch, e)
	case e > c.epoch && e <= gm.floor:
		w.violate("%s got epoch %d after a restart, not above the %d handed out before it", c.id, e, gm.floor)
	}
	gm.maxEpoch = max(gm.maxEpoch, e)
	c.epoch = e
	now := map[gpart]fence.MemberEpoch{}
	for _, ap := range a.Assignment {
		k := gpart{id: ap.TopicID, name: ap.Topic, index: ap.Partition}
		ae := fence.MemberEpoch(ap.AssignmentEpoch)
		now[k] = ae
		if ae == 0 || ae > e {
			w.violate("%s holds %s at assignment epoch %d, its epoch is %d", c.id, k, ae, e)
		}
		if g, ok := gm.installed[k]; w.livePart(k) != nil && (!ok || g != (grant{member: c.id, ae: ae})) {
			w.violate("%s is told it holds %s at assignment epoch %d; the owner was told %v", c.id, k, ae, g)
		}
	}
	var notes []string
	for _, k := range sortedParts(c.owns) {
		if _, keep := now[k]; keep || slow {
			continue
		}
		if t, off, sc, ok := w.pendingCommit(c, k); ok && w.Rng.IntN(2) == 0 {
			notes = append(notes, fmt.Sprintf("commit %s on revoke: %s", k, w.memberCommit(c, k, t, off, false, sc)))
		}
		delete(c.owns, k)
		delete(c.procs, k)
	}
	for k, ae := range now {
		if old, ok := c.owns[k]; !ok || old != ae {
			delete(c.procs, k) // received (again): load its state
		}
		c.owns[k] = ae
	}
	out := fmt.Sprintf("epoch %d, owns %s", e, ownsString(c.owns))
	if len(notes) > 0 {
		out += "; " + strings.Join(notes, "; ")
	}
	return out
}

func ownsString(owns map[gpart]fence.MemberEpoch) string {
	var parts []string
	for _, k := range sortedParts(owns) {
		parts = append(parts, fmt.Sprintf("%s@%d", k, owns[k]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// memberCommit commits (or, with reset, seeks to) off on partition k with
// the member's token, as the member's request would. A commit the model
// says the owner must accept and that is refused is a violation too.
func (w *World) memberCommit(c *simMember, k gpart, t gtoken, off uint64, reset bool, sc *stateCommit) string {
	gm := w.gm
	p := w.livePart(k)
	if p == nil {
		return "topic gone"
	}
	gc := p.m.consumer(groupConsumer, owner.AutoCommitOff)
	st, est := p.Owner.State(), p.Engine.State()
	h := w.holderOf(p, c.id)
	var want error
	if reset {
		want = fence.CheckReset(st, h, t.tok, off)
	} else {
		var floor uint64
		if b, ok := gc.bookmark(); ok {
			floor, _ = resolve(b, est)
		}
		if floor < st.LogStart {
			floor = 0 // the owner's floor when retention overtook it
		}
		want = fence.CheckCommit(st, h, t.tok, off, floor)
	}
	mustAccept := want == nil && t.gen == gm.gen
	kind := "commit"
	if reset {
		kind = "reset"
	}
	gm.act = groupAct{kind: kind, member: c.id, tok: t}
	w.consumer = groupConsumer
	req := owner.CommitRequest{Consumer: owner.Consumer{Name: simGroup, Member: c.id, MemberEpoch: c.epoch}, Token: t.tok, Offset: off}
	var err error
	wrote := len(gc.later)
	switch {
	case reset:
		err = p.Owner.Reset(w.Ctx, req)
	case sc != nil:
		err = p.Owner.CommitState(w.Ctx, req, sc.changes)
	default:
		err = p.Owner.Commit(w.Ctx, req)
	}
	w.consumer = ""
	gm.act = groupAct{}
	if sc != nil && len(gc.later) > wrote {
		w.committedState(c, k, p, sc, gc.later[len(gc.later)-1])
	}
	if sc != nil && err != nil {
		if _, isFence := fence.CodeOf(err); isFence {
			delete(c.procs, k) // drop what was pending; load again
		}
	}
	if err == nil {
		w.syncedAll()
		if reset {
			gm.delivered[k] = gtoken{tok: fence.Issue(st, h, off), gen: gm.gen}
			gm.unknown[k] = false
		}
		return fmt.Sprintf("%s %d ok", kind, off)
	}
	w.noteErr(err)
	_, isFence := fence.CodeOf(err)
	if reset && !isFence {
		// The seek was ordered before its sync failed: the delivered
		// position may have moved.
		gm.unknown[k] = true
	}
	if isFence && mustAccept && !w.Broken() {
		w.violate("%s: %s of %d by %s refused with %v, but the member holds the partition and its token is current", p, kind, off, c.id, err)
	}
	return fmt.Sprintf("%s %d refused: %s", kind, off, errClass(err))
}

// groupPollOp polls "next" as a member. race, if set, runs while the read
// is in flight, between the poll's plan and its completion.
type groupPollOp struct {
	member   string
	k        gpart
	auto     owner.AutoCommit
	maxBytes int
	race     string // "", "leave", "expire", "rejoin", "confirm"
}

func (o groupPollOp) String() string {
	s := fmt.Sprintf("group poll %s %s auto=%s max=%d", o.member, o.k, []string{"off", "delivery", "nextpoll"}[o.auto], o.maxBytes)
	if o.race != "" {
		s += " racing " + o.race
	}
	return s
}

func (o groupPollOp) Run(w *World) (string, error) {
	gm := w.gm
	if gm.state {
		return o.statePoll(w)
	}
	c := w.member(o.member)
	p := w.livePart(o.k)
	if p == nil {
		return "topic gone", nil
	}
	k := o.k
	gc := p.m.consumer(groupConsumer, owner.AutoCommitOff)
	est := p.Engine.State()
	requester := fence.CheckMember(w.holderOf(p, c.id).Member, c.epoch)
	expect, checkExpect := w.expectedGroupNext(p, c.id)
	wrote := len(gc.later)
	raced := ""
	req := owner.PollRequest{
		Consumer: owner.Consumer{Name: simGroup, Member: c.id, MemberEpoch: c.epoch},
		From:     owner.FromNext, AutoCommit: o.auto, MaxBytes: o.maxBytes,
	}
	if o.race != "" {
		req.Transform = func(_ context.Context, _ uint64, res owner.ReadResult) (owner.ReadResult, error) {
			raced = w.raceDuringPoll(c, k, o.race)
			gm.act = groupAct{kind: "poll", member: c.id, auto: o.auto}
			w.consumer = groupConsumer
			return res, nil
		}
	}
	gm.act = groupAct{kind: "poll", member: c.id, auto: o.auto}
	w.consumer = groupConsumer
	res, err := p.Owner.Poll(w.Ctx, req)
	w.consumer = ""
	gm.act = groupAct{}
	if raced != "" {
		raced = "; raced: " + raced
	}
	if err != nil {
		w.noteErr(err)
		if requester == nil && o.race == "" && !w.Broken() && !w.faultFired() {
			w.violate("%s: poll of %s refused with %v, but it holds the partition at the epoch it states", p, c.id, err)
		}
		if o.auto == owner.AutoCommitOnDelivery {
			gm.unknown[k] = true
		}
		return "refused: " + errClass(err) + raced, nil
	}
	if requester != nil {
		w.violate("%s: poll of %s at epoch %d accepted, but %v", p, c.id, c.epoch, requester)
	}
	tok := res.Token
	if !w.accepts(p, c.id, tok) {
		w.violate("%s: poll of %s completed with token %v, which the owner no longer accepts: a poll completed across a change of its holder", p, c.id, tok)
	}
	if inst := gm.installed[k]; tok.Member != fence.NameHash(c.id) || tok.AssignmentEpoch != inst.ae {
		w.violate("%s: poll of %s got a token of assignment epoch %d; the owner was told %v", p, c.id, tok.AssignmentEpoch, inst)
	}
	recs, derr := decode(res.Batches, tok.From)
	if derr != nil {
		w.violate("%s: poll returned a bad batch: %v", p, derr)
		return "", nil
	}
	at := est
	at.LogStart, at.HighWatermark, at.History = res.State.LogStart, res.State.HighWatermark, res.State.History
	p.m.observe("a group poll", recs, at)
	p.m.visibleEnd = max(p.m.visibleEnd, at.HighWatermark)
	if truth, err := readLog(p.Engine, tok.From, res.Next); err == nil && len(truth) != len(recs) {
		w.violate("%s: group poll of [%d,%d) returned %d records, the log holds %d", p, tok.From, res.Next, len(recs), len(truth))
	}
	if checkExpect && tok.From != expect && !gm.unknown[k] {
		w.violate("%s: %s polled next from %d, want %d (delivered %v, committed %v)", p, c.id, tok.From, expect, gm.delivered[k].tok, bookmarkString(gc))
	}
	gt := gtoken{tok: tok, gen: gm.gen}
	gm.delivered[k], gm.unknown[k] = gt, false
	c.tokens[k] = gt
	if o.auto == owner.AutoCommitOnDelivery && len(gc.later) > wrote {
		w.syncedAll() // the reply waited for the commit's sync
	}
	if tok.Next > tok.From && w.Rng.IntN(3) == 0 {
		gm.late = append(gm.late, lateCommit{member: c.id, part: k, tok: gt, offset: tok.Next})
		if len(gm.late) > 8 {
			gm.late = gm.late[1:]
		}
	}
	return fmt.Sprintf("%d records from %d, next %d (member epoch %d, assignment %d)%s",
		len(recs), tok.From, res.Next, tok.MemberEpoch, tok.AssignmentEpoch, raced), nil
}

func bookmarkString(c *consumerModel) string {
	if b, ok := c.bookmark(); ok {
		return fmt.Sprintf("%d@h%d", b.Offset, b.History)
	}
	return "none"
}

// raceDuringPoll changes the poller's world while its read is in flight.
func (w *World) raceDuringPoll(c *simMember, k gpart, what string) string {
	gm := w.gm
	switch what {
	case "leave":
		gm.act = groupAct{kind: "leave", member: c.id}
		err := w.groups.Leave(w.Ctx, simGroup, c.id, c.epoch)
		gm.act = groupAct{}
		w.noteErr(err)
		c.joined = false
		clear(c.owns)
		clear(c.procs)
		return "left: " + errClass(err)
	case "expire":
		time.Sleep(simSession)
		return "session ran out; " + w.expire()
	case "rejoin":
		return w.join(c, wire.AssignorDefault)
	case "confirm":
		// The member gives the partition up (as if it were revoked).
		delete(c.owns, k)
		return w.heartbeat(c, false)
	}
	return ""
}

// expectedGroupNext is where a member's "next" poll must start: its own
// delivered position while the owner would still accept the delivery's
// token from it, else the group's committed offset resolved in the
// current history, else the log start. ok is false when the model cannot
// tell.
func (w *World) expectedGroupNext(p *Partition, member string) (uint64, bool) {
	gm := w.gm
	k := keyOf(p)
	st := p.Engine.State()
	if d := gm.delivered[k]; !d.tok.IsZero() && d.gen == gm.gen && w.accepts(p, member, d.tok) {
		return max(d.tok.Next, st.LogStart), true
	}
	b, ok := p.m.consumers[groupConsumer].bookmark()
	if !ok {
		return st.LogStart, true
	}
	off, err := resolve(b, st)
	return off, err == nil
}

// expire runs the coordinator's timeouts, as the node's loop does.
func (w *World) expire() string {
	w.gm.act = groupAct{kind: "expire"}
	err := w.groups.Expire(w.Ctx)
	w.gm.act = groupAct{}
	if err != nil {
		w.noteErr(err)
		return "expiry failed: " + errClass(err)
	}
	return "expired"
}

// membersString summarizes the members for the trace.
func (w *World) membersString() string {
	var out []string
	for _, c := range w.gm.members {
		switch {
		case !c.joined:
			out = append(out, c.id+" out")
		case c.paused:
			out = append(out, fmt.Sprintf("%s paused e%d %s", c.id, c.epoch, ownsString(c.owns)))
		default:
			out = append(out, fmt.Sprintf("%s e%d %s", c.id, c.epoch, ownsString(c.owns)))
		}
	}
	return strings.Join(out, "; ")
}

// tokenParts returns the partitions of the member's tokens in order.
func (c *simMember) tokenParts() []gpart { return sortedParts(c.tokens) }

// ownedParts returns the member's owned partitions in order.
func (c *simMember) ownedParts() []gpart { return sortedParts(c.owns) }

// active are the members that are in the group as they believe and not
// paused.
func (gm *groupModel) active() []*simMember {
	return slices.DeleteFunc(slices.Clone(gm.members), func(c *simMember) bool { return !c.joined || c.paused })
}
