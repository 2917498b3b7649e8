package sim

import (
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/transport/wire"
)

// GroupChecks are the invariants of the consumer-group simulation, for
// Config.Checks (after every step):
//
//   - no partition has two holders in the coordinator, and every owner
//     holds exactly what the coordinator says, with the same assignment
//     epoch (the installs observed on the way must add up to it);
//   - member epochs are within the group epoch, the owners' member view
//     says the same, the group epoch never goes back (not across
//     restarts), and every member after a restart is at an epoch above
//     every epoch handed out before it;
//   - the committed offsets the coordinator describes are the bookmarks
//     the owners last wrote;
//   - for each partition, at most one member holds a token the owner
//     would accept, judged by the coordinator's facts and by the owner's
//     alike, and no token from before a restart is accepted after it.
//
// The checks of each write (groupBookmarkWritten), install (installing)
// and reply (took) run as they happen.
//
// With Config.StateStore, also: the group's state store holds the state
// committed with the bookmark stored beside it (checkStores).
func GroupChecks() []func(w *World) {
	return []func(w *World){(*World).checkGroups, func(w *World) {
		if w.gm.state && w.gm.used {
			w.checkStores()
		}
	}}
}

func (w *World) checkGroups() {
	gm := w.gm
	if !gm.used {
		return
	}
	d := w.groups.Describe(simGroup)
	ge := fence.MemberEpoch(d.GroupEpoch)
	if ge < gm.groupEpoch && (ge != 0 || len(d.Members) > 0) { // 0: deleted
		w.violate("group epoch went back from %d to %d", gm.groupEpoch, ge)
	}
	gm.groupEpoch = max(gm.groupEpoch, ge)

	// The coordinator's facts, per partition.
	type facts struct {
		member string
		epoch  fence.MemberEpoch
		ae     fence.MemberEpoch
	}
	held := map[gpart]facts{}
	epochs := map[string]fence.MemberEpoch{}
	for _, dm := range d.Members {
		e := fence.MemberEpoch(dm.MemberEpoch)
		epochs[dm.MemberID] = e
		if e > ge {
			w.violate("member %s at epoch %d, ahead of the group epoch %d", dm.MemberID, e, ge)
		}
		if e <= gm.floor {
			w.violate("member %s at epoch %d after a restart; epochs up to %d were handed out before it", dm.MemberID, e, gm.floor)
		}
		if known, ve := w.groups.Member(simGroup, dm.MemberID); !known || ve != e {
			w.violate("the owners' view of %s: known %v at epoch %d; the coordinator has epoch %d", dm.MemberID, known, ve, e)
		}
		gm.maxEpoch = max(gm.maxEpoch, e)
		for _, ap := range dm.Assignment {
			k := gpart{id: ap.TopicID, name: ap.Topic, index: ap.Partition}
			ae := fence.MemberEpoch(ap.AssignmentEpoch)
			if ae > e {
				w.violate("%s holds %s at assignment epoch %d above its epoch %d", dm.MemberID, k, ae, e)
			}
			if other, dup := held[k]; dup {
				w.violate("%s is held by %s and by %s at once", k, other.member, dm.MemberID)
			}
			held[k] = facts{member: dm.MemberID, epoch: e, ae: ae}
		}
	}
	for _, id := range simMembers {
		if _, in := epochs[id]; !in {
			if known, _ := w.groups.Member(simGroup, id); known {
				w.violate("the owners still know %s, which the coordinator does not", id)
			}
		}
	}

	for _, p := range w.Live() {
		k := keyOf(p)
		inst, iok := gm.installed[k]
		h, hok := held[k]
		if iok != hok || iok && (inst.member != h.member || inst.ae != h.ae) {
			w.violate("%s: the owner was told %v (%v), the coordinator has it held by %s at %d (%v)", p, inst, iok, h.member, h.ae, hok)
		}

		// Tokens: at most one member's is accepted, by either's facts.
		byCoord := func(member string, t fence.Token) bool {
			f := fence.MemberFacts{ID: fence.NameHash(member)}
			if e, ok := epochs[member]; ok {
				f.Known, f.Epoch = true, e
			}
			if hok && h.member == member {
				f.Holds, f.AssignmentEpoch = true, h.ae
			}
			hd := fence.Holder{Kind: fence.HolderMember, Consumer: fence.NameHash(simGroup), Member: f}
			return fence.CheckCurrent(p.Owner.State(), hd, t) == nil
		}
		valid := map[string]bool{}
		consider := func(member string, t gtoken) {
			if t.tok.IsZero() || t.tok.Topic != p.Topic.ID || t.tok.Partition != uint32(p.Index) {
				return
			}
			owner, coord := w.accepts(p, member, t.tok), byCoord(member, t.tok)
			if owner != coord {
				w.violate("%s: the owner would %s %s's token %v, the coordinator's facts say the opposite", p, acceptWord(owner), member, t.tok)
			}
			if !owner && !coord {
				return
			}
			if t.gen != gm.gen {
				w.violate("%s: %s's token %v from before a restart would be accepted after it", p, member, t.tok)
			}
			valid[member] = true
		}
		for _, c := range gm.members {
			consider(c.id, c.tokens[k])
		}
		for _, l := range gm.late {
			if l.part == k {
				consider(l.member, l.tok)
			}
		}
		if len(valid) > 1 {
			w.violate("%s: members %v hold tokens the owner would accept at once", p, sortedKeys(valid))
		}
	}

	// The offsets the coordinator describes are the bookmarks written.
	for _, o := range d.Offsets {
		t := w.topics[o.Topic]
		if t == nil || int(o.Partition) >= len(t.Parts) || o.Status != wire.StatusOK {
			continue
		}
		c := t.Parts[o.Partition].m.consumers[groupConsumer]
		var b struct {
			ok  bool
			off uint64
			h   uint64
		}
		if c != nil {
			if bm, ok := c.bookmark(); ok {
				b.ok, b.off, b.h = true, bm.Offset, uint64(bm.History)
			}
		}
		if o.HasOffset != b.ok || b.ok && (o.Offset != b.off || o.History != b.h) {
			w.violate("%s/%d: the coordinator describes the committed offset as %v %d@h%d; the owner wrote %v %d@h%d",
				o.Topic, o.Partition, o.HasOffset, o.Offset, o.History, b.ok, b.off, b.h)
		}
	}
}

func acceptWord(ok bool) string {
	if ok {
		return "accept"
	}
	return "refuse"
}
