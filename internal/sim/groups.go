package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// The consumer-group simulation: a group.Groups coordinator wired over the
// World's owners as the node wires it (opened from the metadata store
// before the owners, answering their member checks, installing every
// change of a partition's holder as a step of the partition's owner), and
// a few simulated members driving it. The model learns what the
// coordinator tells members (join and heartbeat replies), what the owners
// were told (every Assign and Unassign, observed on the way) and every
// group bookmark the owners write (the log adapter reports them), and the
// checks compare.

// The group the members share and its timing. Short timeouts make pauses
// past the session timeout cheap in simulated time.
const (
	simGroup         = "g"
	simHeartbeat     = 250 * time.Millisecond
	simSession       = time.Second
	simRebalance     = 2 * time.Second
	simEpochBlock    = 4
	groupConsumerKey = "g/" + simGroup
	// groupConsumer names the group's progress in the partition models.
	groupConsumer = "group " + simGroup
)

// simMembers are the members' ids.
var simMembers = []string{"m0", "m1", "m2"}

// gpart names a partition of one topic creation.
type gpart struct {
	id    fence.TopicID
	name  string
	index uint32
}

func (k gpart) String() string { return fmt.Sprintf("%s/%d", k.name, k.index) }

func keyOf(p *Partition) gpart {
	return gpart{id: p.Topic.ID, name: p.Topic.Name, index: uint32(p.Index)}
}

// grant is a partition's holder as its owner was told: the member and the
// assignment epoch.
type grant struct {
	member string
	ae     fence.MemberEpoch
}

// groupModel is what the simulator knows of the group.
type groupModel struct {
	members []*simMember
	// installed is, per partition, the holder its current owner was told
	// of (Assign); absent when it has none. Owners forget at a restart.
	installed map[gpart]grant
	// lastAE is the highest assignment epoch ever installed per partition,
	// across restarts.
	lastAE map[gpart]fence.MemberEpoch
	// maxEpoch is the highest member epoch handed out; floor the highest
	// handed out before the last restart; groupEpoch the highest group
	// epoch described.
	maxEpoch, floor, groupEpoch fence.MemberEpoch
	// gen counts restarts: tokens carry the generation they were issued in.
	gen int
	// delivered is the group's delivered position per partition as the
	// owner keeps it (memory only), and whether a failed poll may have
	// moved it.
	delivered map[gpart]gtoken
	unknown   map[gpart]bool
	// late are commits made earlier and sent later; strayLeave a leave
	// request (member and epoch) delivered later.
	late       []lateCommit
	strayLeave *strayLeave
	// act is the member action running now.
	act groupAct
	// used: a group op ran (the checks have something to check).
	used bool
	// state: the members keep counting state (Config.StateStore).
	state bool
}

// simMember is a simulated group member: what it believes.
type simMember struct {
	id     string
	joined bool
	epoch  fence.MemberEpoch
	// joinEpoch is the epoch its incarnation joined at.
	joinEpoch fence.MemberEpoch
	// owns are the partitions it processes, with the assignment epochs it
	// was told; a slow member keeps revoked ones until it gets to them.
	owns map[gpart]fence.MemberEpoch
	// paused: it does nothing (no heartbeats) until it resumes, unaware
	// of what happened meanwhile.
	paused bool
	// stuck: it heartbeats but never gets to giving up what it is asked
	// to (a slow member past its rebalance timeout).
	stuck bool
	// tokens are the tokens of its latest polls, per partition.
	tokens map[gpart]gtoken
	// procs are its processings of partitions (the state-store
	// simulation).
	procs map[gpart]*proc
}

// gtoken is a token with the restart generation it was issued in.
type gtoken struct {
	tok fence.Token
	gen int
}

// strayLeave is a leave request of one incarnation, delivered later.
type strayLeave struct {
	member string
	epoch  fence.MemberEpoch
}

// lateCommit is a commit computed at one moment and sent later.
type lateCommit struct {
	member string
	part   gpart
	tok    gtoken
	offset uint64
	state  *stateCommit
}

// groupAct is the member action the current op performs, for the
// observers of Assign and bookmark writes.
type groupAct struct {
	kind   string // join, leave, heartbeat, poll, commit, reset
	member string
	owned  map[wire.TopicPartition]bool // a heartbeat's owned partitions
	tok    gtoken                       // a commit's or reset's token
	auto   owner.AutoCommit             // a poll's commit mode
}

func newGroupModel() *groupModel {
	gm := &groupModel{
		installed: map[gpart]grant{}, lastAE: map[gpart]fence.MemberEpoch{},
		delivered: map[gpart]gtoken{}, unknown: map[gpart]bool{},
	}
	for _, id := range simMembers {
		gm.members = append(gm.members, &simMember{id: id, owns: map[gpart]fence.MemberEpoch{}, tokens: map[gpart]gtoken{}, procs: map[gpart]*proc{}})
	}
	return gm
}

// openGroups opens the coordinator from the metadata store, as a node
// does before it builds its owners.
func (w *World) openGroups() error {
	g, err := group.OpenGroups(group.GroupsConfig{
		Meta: w.meta, Topics: group.FuncTopics(w.groupTopic, offsetStatus), Now: time.Now,
		HeartbeatInterval: simHeartbeat, SessionTimeout: simSession, RebalanceTimeout: simRebalance,
		EpochBlock: simEpochBlock,
	})
	if err != nil {
		return fmt.Errorf("sim: open groups: %w", err)
	}
	w.groups = g
	return nil
}

// offsetStatus is the status of a group offset the World could not read:
// the checks tell only OK from the rest, so the protocol's own mapping of
// an error will do (the node's adds statuses for its plugins and storage).
func offsetStatus(err error) (wire.Status, string) { return wire.StatusOf(err), err.Error() }

// groupTopic is the coordinator's view of the World's live topics: each
// owner wrapped so that the model sees what it is told.
func (w *World) groupTopic(name string) (fence.TopicID, []group.PartitionAssigner, []owner.PartitionLog, bool) {
	t := w.topics[name]
	if t == nil {
		return fence.TopicID{}, nil, nil, false
	}
	parts := make([]group.PartitionAssigner, len(t.Parts))
	logs := make([]owner.PartitionLog, len(t.Parts))
	for i, p := range t.Parts {
		parts[i], logs[i] = assigner{w: w, p: p}, p.log
	}
	return t.ID, parts, logs, true
}

// assigner is an owner as the coordinator drives it, observed.
type assigner struct {
	w *World
	p *Partition
}

func (a assigner) Assign(group, member string, ae fence.MemberEpoch) {
	a.w.installing(a.p, group, &grant{member: member, ae: ae})
	a.p.Owner.Assign(group, member, ae)
}

func (a assigner) Unassign(group string) {
	a.w.installing(a.p, group, nil)
	a.p.Owner.Unassign(group)
}

// DeleteConsumer removes the group's progress and state on the partition
// (the group is being deleted), as the owner does for the node.
func (a assigner) DeleteConsumer(ctx context.Context, group string) (owner.Durable, error) {
	d, err := a.p.Owner.DeleteConsumer(ctx, group)
	if err == nil && group == simGroup {
		gm, k := a.w.gm, keyOf(a.p)
		delete(gm.installed, k)
		delete(gm.delivered, k)
		if c := a.p.m.consumers[groupConsumer]; c != nil {
			c.durable, c.later = nil, nil
		}
		clear(a.p.m.states) // a group created again starts afresh
	}
	return d, err
}

// installing checks a change of a partition's holder as the coordinator
// installs it, and records it. A partition leaves its holder only when
// the holder confirmed the revocation (a heartbeat that no longer owns
// it), left, joined again, or is gone from the group (its session or
// rebalance timeout ran out): never while it may still be working on it.
// Assignment epochs of a partition only increase, across restarts too.
func (w *World) installing(p *Partition, group string, g *grant) {
	gm, k := w.gm, keyOf(p)
	if group != simGroup {
		w.violate("%s: an assignment of unknown group %q installed", p, group)
		return
	}
	if prev, ok := gm.installed[k]; ok && (g == nil || *g != prev) {
		act := gm.act
		known, _ := w.groups.Member(simGroup, prev.member)
		switch {
		case act.member == prev.member && (act.kind == "join" || act.kind == "leave"):
		case act.member == prev.member && act.kind == "heartbeat" && !act.owned[wire.TopicPartition{Topic: k.name, Partition: k.index}]:
		case !known:
		default:
			w.violate("%s moved from %s (assignment epoch %d) to %v during %s of %s, which %s still knows and which did not give it up",
				k, prev.member, prev.ae, g, act.kind, act.member, simGroup)
		}
	}
	if g == nil {
		delete(gm.installed, k)
		return
	}
	if g.ae <= gm.lastAE[k] {
		w.violate("%s assigned to %s at assignment epoch %d, not above the %d installed before", k, g.member, g.ae, gm.lastAE[k])
	}
	gm.lastAE[k] = max(gm.lastAE[k], g.ae)
	gm.installed[k] = *g
}

// holderOf is what the partition's owner knows of member now, rebuilt from
// what the model observed: the coordinator's member view and the
// assignment installed on the owner.
func (w *World) holderOf(p *Partition, member string) fence.Holder {
	f := fence.MemberFacts{ID: fence.NameHash(member)}
	f.Known, f.Epoch = w.groups.Member(simGroup, member)
	if g, ok := w.gm.installed[keyOf(p)]; ok && g.member == member {
		f.Holds, f.AssignmentEpoch = true, g.ae
	}
	return fence.Holder{Kind: fence.HolderMember, Consumer: fence.NameHash(simGroup), Member: f}
}

// accepts reports whether p's owner would accept tok from member now.
func (w *World) accepts(p *Partition, member string, tok fence.Token) bool {
	return fence.CheckCurrent(p.Owner.State(), w.holderOf(p, member), tok) == nil
}

// groupRestarted: the process is gone, and with it the coordinator's
// members and the owners' assignments and delivered positions. Members do
// not know yet.
func (gm *groupModel) restarted() {
	gm.floor = gm.maxEpoch
	gm.gen++
	clear(gm.installed)
	clear(gm.delivered)
	clear(gm.unknown)
}

// groupBookmarkWritten checks a write of the group's bookmark as the
// owner orders it: only for the member that holds the partition, with a
// token of its current assignment, never below the committed offset
// (unless the member reset it explicitly).
func (m *partModel) groupBookmarkWritten(b owner.Bookmark, st engine.PartitionState) {
	w := m.w
	gm := w.gm
	act := gm.act
	p := w.partOf(m)
	if p == nil {
		w.violate("%s: a group bookmark written on a partition that is not live", m)
		return
	}
	k := keyOf(p)
	inst, held := gm.installed[k]
	known, epoch := w.groups.Member(simGroup, act.member)
	switch {
	case gm.state && act.kind != "commit":
		w.violate("%s: group bookmark %+v written by a %s of %s, not with the state", m, b, act.kind, act.member)
	case act.kind != "poll" && act.kind != "commit" && act.kind != "reset":
		w.violate("%s: group bookmark %+v written outside a member's poll or commit (%q)", m, b, act.kind)
		return
	case !held || inst.member != act.member:
		w.violate("%s: offset %d of %s applied, but the owner was told %v holds the partition: a non-holder's commit", m, b.Offset, act.member, inst)
	case !known:
		w.violate("%s: offset %d of %s applied, but the group does not know %s", m, b.Offset, act.member, act.member)
	}
	tok, checkTok := act.tok, true
	switch {
	case act.kind == "poll" && act.auto == owner.AutoCommitOnNextPoll:
		// The commit of the group's delivered position, which must be
		// the member's own.
		tok = gm.delivered[k]
	case act.kind == "poll":
		// A commit on delivery: of the poll's own token, checked when
		// the poll returns.
		checkTok = false
	}
	if checkTok {
		t := tok.tok
		switch {
		case tok.gen != gm.gen:
			w.violate("%s: offset %d applied with a token from before a restart (%v)", m, b.Offset, t)
		case t.Member != fence.NameHash(act.member) || t.AssignmentEpoch != inst.ae:
			w.violate("%s: offset %d of %s applied with a token of assignment epoch %d; the assignment installed is %v: work of an earlier assignment",
				m, b.Offset, act.member, t.AssignmentEpoch, inst)
		case t.MemberEpoch < inst.ae || t.MemberEpoch > epoch:
			w.violate("%s: offset %d applied with a token of member epoch %d outside [%d, %d]", m, b.Offset, t.MemberEpoch, inst.ae, epoch)
		case t.History != st.History:
			w.violate("%s: offset %d applied with a token of history %d in history %d", m, b.Offset, t.History, st.History)
		}
	}
	if act.kind == "commit" && (b.Offset < tok.tok.From || b.Offset > tok.tok.Next) {
		w.violate("%s: offset %d of %s applied outside what its token delivered [%d, %d)", m, b.Offset, act.member, tok.tok.From, tok.tok.Next)
	}
	if act.kind == "reset" {
		return
	}
	c := m.consumers[groupConsumer]
	if prev, ok := c.bookmark(); ok {
		if floor, err := resolve(prev, st); err == nil && b.Offset < floor {
			w.violate("%s: the group's committed offset moved back from %d (%+v) to %d by a %s of %s", m, floor, prev, b.Offset, act.kind, act.member)
		}
	}
}

// partOf returns the live partition of a model.
func (w *World) partOf(m *partModel) *Partition {
	t := w.topics[m.topic.name]
	if t == nil || t.ID != m.topic.id || m.index >= len(t.Parts) {
		return nil
	}
	return t.Parts[m.index]
}

// livePart returns the live partition k names, or nil.
func (w *World) livePart(k gpart) *Partition {
	t := w.topics[k.name]
	if t == nil || t.ID != k.id || int(k.index) >= len(t.Parts) {
		return nil
	}
	return t.Parts[k.index]
}

// sortedParts returns the keys of m in order.
func sortedParts[V any](m map[gpart]V) []gpart {
	return slices.SortedFunc(maps.Keys(m), func(a, b gpart) int {
		if a.name != b.name {
			if a.name < b.name {
				return -1
			}
			return 1
		}
		if c := slices.Compare(a.id[:], b.id[:]); c != 0 {
			return c
		}
		return int(a.index) - int(b.index)
	})
}

// ownedList is what a member says it owns in a heartbeat.
func ownedList(owns map[gpart]fence.MemberEpoch) []wire.TopicPartition {
	var out []wire.TopicPartition
	for _, k := range sortedParts(owns) {
		out = append(out, wire.TopicPartition{Topic: k.name, Partition: k.index})
	}
	return out
}
