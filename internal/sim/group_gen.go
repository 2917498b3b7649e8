package sim

import (
	"fmt"
	"time"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// joinOp joins a member (again).
type joinOp struct {
	member   string
	assignor wire.GroupAssignor
}

func (o joinOp) String() string { return "join " + o.member }

func (o joinOp) Run(w *World) (string, error) {
	return w.join(w.member(o.member), o.assignor), nil
}

// leaveOp makes a member leave; prompt, it first commits what it has
// pending on the partitions it owns.
type leaveOp struct {
	member  string
	prompt  bool
	anyIncr bool // leave with epoch 0: whatever the incarnation
}

func (o leaveOp) String() string { return "leave " + o.member }

func (o leaveOp) Run(w *World) (string, error) {
	c := w.member(o.member)
	out := ""
	if o.prompt {
		for _, k := range c.ownedParts() {
			if t, off, sc, ok := w.pendingCommit(c, k); ok {
				out += fmt.Sprintf("commit %s: %s; ", k, w.memberCommit(c, k, t, off, false, sc))
			}
		}
	}
	e := c.epoch
	if o.anyIncr {
		e = 0
	}
	w.gm.act = groupAct{kind: "leave", member: c.id}
	err := w.groups.Leave(w.Ctx, simGroup, c.id, e)
	w.gm.act = groupAct{}
	c.joined = false
	clear(c.owns)
	clear(c.procs)
	if err != nil {
		w.noteErr(err)
		return out + "left: " + errClass(err), nil
	}
	return out + "left", nil
}

// heartbeatOp sends one member's heartbeat.
type heartbeatOp struct {
	member string
	slow   bool
}

func (o heartbeatOp) String() string {
	if o.slow {
		return "heartbeat " + o.member + " slow"
	}
	return "heartbeat " + o.member
}

func (o heartbeatOp) Run(w *World) (string, error) {
	c := w.member(o.member)
	return w.heartbeat(c, o.slow || c.stuck), nil
}

// roundOp lets beats heartbeat intervals pass: after each, every member
// in the group and not paused heartbeats (some slow, some heartbeats
// lost), and the coordinator runs its timeouts.
type roundOp struct{ beats int }

func (o roundOp) String() string { return fmt.Sprintf("%d heartbeat intervals pass", o.beats) }

func (o roundOp) Run(w *World) (string, error) {
	var events string
	for range o.beats {
		time.Sleep(simHeartbeat)
		for _, c := range w.gm.active() {
			switch r := w.Rng.IntN(10); {
			case r == 0: // lost
			case r < 3 || c.stuck:
				if out := w.heartbeat(c, true); !c.joined || len(events) < 200 {
					events += c.id + " slow: " + out + "; "
				}
			default:
				w.heartbeat(c, false)
			}
		}
		if out := w.expire(); out != "expired" {
			events += out + "; "
		}
	}
	return events + w.membersString(), nil
}

// pauseOp pauses a member or lets it resume; with stuck, the member
// keeps heartbeating but stops giving up partitions (or resumes doing so).
type pauseOp struct {
	member string
	stuck  bool
}

func (o pauseOp) String() string {
	if o.stuck {
		return "stuck/unstuck " + o.member
	}
	return "pause/resume " + o.member
}

func (o pauseOp) Run(w *World) (string, error) {
	c := w.member(o.member)
	if o.stuck {
		c.stuck = !c.stuck
		return fmt.Sprintf("stuck %v", c.stuck), nil
	}
	c.paused = !c.paused
	if c.paused {
		return "paused", nil
	}
	return "resumed", nil
}

// groupCommitOp commits a member's latest delivery on a partition (or a
// point within it).
type groupCommitOp struct {
	member string
	k      gpart
	within bool
}

func (o groupCommitOp) String() string { return fmt.Sprintf("group commit %s %s", o.member, o.k) }

func (o groupCommitOp) Run(w *World) (string, error) {
	c := w.member(o.member)
	if w.gm.state {
		t, off, sc, ok := w.pendingCommit(c, o.k)
		if !ok {
			return "nothing to commit", nil
		}
		return w.memberCommit(c, o.k, t, off, false, sc), nil
	}
	t := c.tokens[o.k]
	off := t.tok.Next
	if o.within && t.tok.Next > t.tok.From {
		off = t.tok.From + w.Rng.Uint64N(t.tok.Next-t.tok.From+1)
	}
	return w.memberCommit(c, o.k, t, off, false, nil), nil
}

// lateCommitOp sends a commit computed earlier: delayed across whatever
// happened since (reassignments, regains, rejoins, restarts).
type lateCommitOp struct{ i int }

func (o lateCommitOp) String() string { return "late commit" }

func (o lateCommitOp) Run(w *World) (string, error) {
	gm := w.gm
	l := gm.late[o.i]
	gm.late = append(gm.late[:o.i], gm.late[o.i+1:]...)
	out := w.memberCommit(w.member(l.member), l.part, l.tok, l.offset, false, l.state)
	return fmt.Sprintf("%s on %s (member epoch %d, assignment %d, generation %d): %s",
		l.member, l.part, l.tok.tok.MemberEpoch, l.tok.tok.AssignmentEpoch, l.tok.gen, out), nil
}

// groupResetOp seeks the group back (or forward) on a partition with a
// member's latest token: the one way a committed offset may move back.
type groupResetOp struct {
	member string
	k      gpart
}

func (o groupResetOp) String() string { return fmt.Sprintf("group reset %s %s", o.member, o.k) }

func (o groupResetOp) Run(w *World) (string, error) {
	c := w.member(o.member)
	p := w.livePart(o.k)
	if p == nil {
		return "topic gone", nil
	}
	st := p.Engine.State()
	off := st.LogStart + w.Rng.Uint64N(st.HighWatermark-st.LogStart+1)
	return w.memberCommit(c, o.k, c.tokens[o.k], off, true, nil), nil
}

// strayLeaveOp records a leave request of a member's incarnation now, or
// delivers the one recorded: a leave of an earlier incarnation is
// ignored.
type strayLeaveOp struct{ member string }

func (o strayLeaveOp) String() string {
	if o.member != "" {
		return "leave of " + o.member + " delayed"
	}
	return "delayed leave arrives"
}

func (o strayLeaveOp) Run(w *World) (string, error) {
	gm := w.gm
	if o.member != "" {
		c := w.member(o.member)
		gm.strayLeave = &strayLeave{member: c.id, epoch: c.epoch}
		return fmt.Sprintf("epoch %d", c.epoch), nil
	}
	l := gm.strayLeave
	gm.strayLeave = nil
	c := w.member(l.member)
	// The timeouts first, so that a member the leave's own step would
	// expire is not taken for one the leave removed.
	expired := w.expire()
	before, _ := w.groups.Member(simGroup, c.id)
	earlier := before && c.joined && l.epoch < c.joinEpoch
	gm.act = groupAct{kind: "leave", member: c.id}
	err := w.groups.Leave(w.Ctx, simGroup, c.id, l.epoch)
	gm.act = groupAct{}
	if err != nil {
		w.noteErr(err)
		return fmt.Sprintf("leave of %s at epoch %d: %s", c.id, l.epoch, errClass(err)), nil
	}
	known, _ := w.groups.Member(simGroup, c.id)
	if earlier && !known {
		w.violate("a leave of %s at epoch %d removed its incarnation that joined at %d", c.id, l.epoch, c.joinEpoch)
	}
	return fmt.Sprintf("%s; leave of %s at epoch %d: known %v, still %v", expired, c.id, l.epoch, before, known), nil
}

// deleteGroupOp deletes the group, which has no members: its committed
// offsets and state go, and a group created again under its name
// continues above its epochs.
type deleteGroupOp struct{}

func (deleteGroupOp) String() string { return "delete group" }

func (deleteGroupOp) Run(w *World) (string, error) {
	w.gm.act = groupAct{kind: "delete"}
	err := w.groups.Delete(w.Ctx, simGroup)
	w.gm.act = groupAct{}
	if err != nil {
		w.noteErr(err)
		return "failed: " + errClass(err), nil
	}
	w.syncedAll()
	return "deleted", nil
}

// expireOp runs the coordinator's timeouts.
type expireOp struct{}

func (expireOp) String() string { return "group expiry" }

func (expireOp) Run(w *World) (string, error) { return w.expire(), nil }

// GroupGenerators are the ops of the consumer-group simulation: members
// joining, leaving, heartbeating (prompt, slow, lost), pausing past their
// session timeout, polling "next" with each commit mode (some racing a
// change of their membership), committing promptly and late, resetting,
// and the coordinator's timeouts. Append them to DefaultGenerators: the
// restarts, purges, deletions and faults of the storage simulation act on
// the group too.
func GroupGenerators() []Generator {
	active := func(n int) func(*World) int {
		return func(w *World) int {
			if len(w.gm.active()) == 0 {
				return 0
			}
			return n
		}
	}
	withTokens := func(w *World) []*simMember {
		var out []*simMember
		for _, c := range w.gm.active() {
			if len(c.tokens) > 0 {
				out = append(out, c)
			}
		}
		return out
	}
	return []Generator{
		{Name: "join", Weight: func(w *World) int {
			for _, c := range w.gm.members {
				if !c.joined {
					return 10
				}
			}
			return 1
		}, Next: func(w *World) Op {
			var out []*simMember
			for _, c := range w.gm.members {
				if !c.joined {
					out = append(out, c)
				}
			}
			if len(out) == 0 || w.Rng.IntN(4) == 0 {
				out = w.gm.members
			}
			return joinOp{member: pick(w, out).id, assignor: wire.GroupAssignor(1 + w.Rng.IntN(2))}
		}},
		{Name: "leave", Weight: active(1), Next: func(w *World) Op {
			return leaveOp{member: pick(w, w.gm.active()).id, prompt: w.Rng.IntN(2) == 0, anyIncr: w.Rng.IntN(4) == 0}
		}},
		{Name: "heartbeat", Weight: active(8), Next: func(w *World) Op {
			return heartbeatOp{member: pick(w, w.gm.active()).id, slow: w.Rng.IntN(4) == 0}
		}},
		{Name: "round", Weight: func(w *World) int {
			if !w.gm.used {
				return 0
			}
			return 6
		}, Next: func(w *World) Op {
			return roundOp{beats: 1 + w.Rng.IntN(6)}
		}},
		{Name: "pause", Weight: func(w *World) int {
			for _, c := range w.gm.members {
				if c.joined {
					return 3
				}
			}
			return 0
		}, Next: func(w *World) Op {
			var out []*simMember
			for _, c := range w.gm.members {
				if c.joined {
					out = append(out, c)
				}
			}
			return pauseOp{member: pick(w, out).id, stuck: w.Rng.IntN(3) == 0}
		}},
		{Name: "group poll", Weight: active(20), Next: func(w *World) Op {
			c := pick(w, w.gm.active())
			var k gpart
			if owned := c.ownedParts(); len(owned) > 0 && w.Rng.IntN(8) > 0 {
				k = pick(w, owned)
			} else if live := w.Live(); len(live) > 0 {
				k = keyOf(pick(w, live)) // perhaps one it does not hold
			} else {
				return nil
			}
			op := groupPollOp{member: c.id, k: k, auto: owner.AutoCommit(w.Rng.IntN(3)), maxBytes: []int{1, 300, 2048}[w.Rng.IntN(3)]}
			if w.gm.state {
				op.auto = owner.AutoCommitOff // state members commit with their state
			}
			if w.Rng.IntN(10) == 0 {
				op.race = pick(w, []string{"leave", "expire", "rejoin", "confirm"})
			}
			return op
		}},
		{Name: "group commit", Weight: func(w *World) int {
			if len(withTokens(w)) == 0 {
				return 0
			}
			return 12
		}, Next: func(w *World) Op {
			c := pick(w, withTokens(w))
			return groupCommitOp{member: c.id, k: pick(w, c.tokenParts()), within: w.Rng.IntN(3) == 0}
		}},
		{Name: "late commit", Weight: func(w *World) int {
			if len(w.gm.late) == 0 {
				return 0
			}
			return 4
		}, Next: func(w *World) Op {
			return lateCommitOp{i: w.Rng.IntN(len(w.gm.late))}
		}},
		{Name: "group reset", Weight: func(w *World) int {
			if w.gm.state || len(withTokens(w)) == 0 {
				return 0
			}
			return 1
		}, Next: func(w *World) Op {
			c := pick(w, withTokens(w))
			return groupResetOp{member: c.id, k: pick(w, c.tokenParts())}
		}},
		{Name: "stray leave", Weight: func(w *World) int {
			if w.gm.strayLeave != nil {
				return 1
			}
			return active(1)(w)
		}, Next: func(w *World) Op {
			if w.gm.strayLeave != nil {
				return strayLeaveOp{}
			}
			return strayLeaveOp{member: pick(w, w.gm.active()).id}
		}},
		{Name: "delete group", Weight: func(w *World) int {
			if !w.gm.used || w.Disk.Armed() || w.Broken() {
				return 0
			}
			for _, id := range simMembers {
				if known, _ := w.groups.Member(simGroup, id); known {
					return 0
				}
			}
			return 2
		}, Next: func(w *World) Op { return deleteGroupOp{} }},
		{Name: "expire", Weight: func(w *World) int {
			if !w.gm.used {
				return 0
			}
			return 2
		}, Next: func(w *World) Op { return expireOp{} }},
	}
}
