package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
)

// The state-store simulation (Config.StateStore): the group's members
// count records per key and keep the counts in the partition's fenced
// state store, committed with their offset in one call (CommitState). A
// member that receives a partition loads its state with the offset it
// belongs to (LoadState) and reads on explicitly from where the snapshot
// says, counting every record it reads; a member refused as fenced drops
// what it had and loads again once it holds the partition.
//
// The model registers every state write with the offsets of the records
// its counts include, and checks that each is the exact fold of those
// records, each counted once; that what the store holds (after every
// step, and after every recovery) is the state registered with the
// bookmark stored beside it; and that a load returns them together.

// stateKeyOf is the key a record is counted under.
func stateKeyOf(value string) string {
	h := fnv.New32a()
	h.Write([]byte(value))
	return "k" + strconv.Itoa(int(h.Sum32()%4))
}

// proc is a member's processing of a partition: the counts it believes
// (the loaded state and what it read since), where it reads next, the keys
// changed since its last commit, and the offsets its counts include.
type proc struct {
	pos     uint64
	counts  map[string]int64
	dirty   map[string]bool
	covered spans
	tok     gtoken
}

// stateWrite is a state the model registered with a bookmark.
type stateWrite struct {
	counts  map[string]int64
	covered spans
}

// stateCommit is what a commit of a member's processing carries.
type stateCommit struct {
	changes []owner.StateChange
	counts  map[string]int64
	covered spans
}

// pendingCommit is what the member would commit on k now: in the
// state-store simulation its processing (token, position, changed keys),
// else its latest token's end.
func (w *World) pendingCommit(c *simMember, k gpart) (gtoken, uint64, *stateCommit, bool) {
	if !w.gm.state {
		t, ok := c.tokens[k]
		return t, t.tok.Next, nil, ok
	}
	pr := c.procs[k]
	if pr == nil || pr.tok.tok.IsZero() {
		return gtoken{}, 0, nil, false
	}
	sc := &stateCommit{counts: maps.Clone(pr.counts), covered: slices.Clone(pr.covered)}
	for _, key := range sortedKeys(pr.dirty) {
		sc.changes = append(sc.changes, owner.StateChange{Key: []byte(key), Value: []byte(strconv.FormatInt(pr.counts[key], 10))})
	}
	return pr.tok, pr.pos, sc, true
}

// committedState notes a commit of sc that the owner ordered: the member's
// changes are committed, and the model registers the state with the
// bookmark written, checking that it is the exact fold of the records it
// includes.
func (w *World) committedState(c *simMember, k gpart, p *Partition, sc *stateCommit, b owner.Bookmark) {
	if pr := c.procs[k]; pr != nil && maps.Equal(pr.counts, sc.counts) {
		clear(pr.dirty)
	}
	m := p.m
	if fold := m.fold(sc.covered); !maps.Equal(fold, sc.counts) {
		w.violate("%s: %s committed counts %v at %d; the records they include (%v) fold to %v", p, c.id, sc.counts, b.Offset, sc.covered, fold)
	}
	if prev, ok := m.states[b]; ok && !maps.Equal(prev.counts, sc.counts) {
		w.violate("%s: two states committed at %d@h%d: %v and %v", p, b.Offset, b.History, prev.counts, sc.counts)
	}
	m.states[b] = &stateWrite{counts: sc.counts, covered: sc.covered}
}

// fold counts the records at the offsets of covered.
func (m *partModel) fold(covered spans) map[string]int64 {
	out := map[string]int64{}
	for _, s := range covered {
		for off := s.lo; off < s.hi; off++ {
			if v, ok := m.values[uint64(off)]; ok {
				out[stateKeyOf(v)]++
			}
		}
	}
	return out
}

// loadState loads the member's state of p, checking the snapshot against
// the model: its bookmark is the one last written, its entries the state
// registered with it, and it resumes where the bookmark resolves.
func (w *World) loadState(c *simMember, p *Partition) (*proc, string) {
	gm, m := w.gm, p.m
	gc := m.consumer(groupConsumer, owner.AutoCommitOff)
	requester := fence.CheckMember(w.holderOf(p, c.id).Member, c.epoch)
	snap, err := p.Owner.LoadState(w.Ctx, owner.Consumer{Name: simGroup, Member: c.id, MemberEpoch: c.epoch}, nil)
	if err != nil {
		w.noteErr(err)
		if requester == nil && !w.Broken() && !w.faultFired() {
			w.violate("%s: state load of %s refused with %v, but it holds the partition at the epoch it states", p, c.id, err)
		}
		return nil, "load refused: " + errClass(err)
	}
	if requester != nil {
		w.violate("%s: state load of %s at epoch %d answered, but %v", p, c.id, c.epoch, requester)
	}
	pr := &proc{counts: map[string]int64{}, dirty: map[string]bool{}}
	for _, e := range snap.Entries {
		n, perr := strconv.ParseInt(string(e.Value), 10, 64)
		if perr != nil {
			w.violate("%s: state value %q of %q is not a count", p, e.Value, e.Key)
		}
		pr.counts[string(e.Key)] = n
	}
	st := p.Engine.State()
	b, ok := gc.bookmark()
	want := st.LogStart
	switch {
	case snap.HasCommitted != ok || ok && snap.Committed != b:
		w.violate("%s: state loaded with bookmark %v (%v); the bookmark written is %v (%v)", p, snap.Committed, snap.HasCommitted, b, ok)
	case ok:
		sw := m.states[b]
		if sw == nil {
			w.violate("%s: state loaded at %v, where no state was committed", p, b)
			break
		}
		if !maps.Equal(pr.counts, sw.counts) {
			w.violate("%s: state loaded at %d@h%d is %v; the state committed with it is %v: the state and its offset came apart",
				p, b.Offset, b.History, pr.counts, sw.counts)
		}
		pr.covered = slices.Clone(sw.covered)
		if off, rerr := resolve(b, st); rerr == nil {
			want = off
		}
	case len(pr.counts) > 0:
		w.violate("%s: state %v loaded without a committed offset", p, pr.counts)
	}
	if snap.Next != want {
		w.violate("%s: the state loaded resumes at %d, want %d (bookmark %v)", p, snap.Next, want, b)
	}
	pr.pos = snap.Next
	gm.used = true
	return pr, fmt.Sprintf("loaded %d keys at %d", len(pr.counts), snap.Next)
}

// statePoll is a group poll of the state-store simulation: load the state
// if the member has none for the partition, then read on from its
// position explicitly and count.
func (o groupPollOp) statePoll(w *World) (string, error) {
	gm := w.gm
	c := w.member(o.member)
	p := w.livePart(o.k)
	if p == nil {
		return "topic gone", nil
	}
	k := o.k
	out := ""
	pr := c.procs[k]
	if pr == nil {
		var msg string
		if pr, msg = w.loadState(c, p); pr == nil {
			return msg, nil
		}
		c.procs[k] = pr
		out = msg + "; "
	}
	requester := fence.CheckMember(w.holderOf(p, c.id).Member, c.epoch)
	raced := ""
	req := owner.PollRequest{
		Consumer: owner.Consumer{Name: simGroup, Member: c.id, MemberEpoch: c.epoch},
		From:     owner.FromOffset, Offset: pr.pos, MaxBytes: o.maxBytes,
	}
	if o.race != "" {
		req.Transform = func(_ context.Context, _ uint64, res owner.ReadResult) (owner.ReadResult, error) {
			raced = "; raced: " + w.raceDuringPoll(c, k, o.race)
			gm.act = groupAct{kind: "poll", member: c.id}
			return res, nil
		}
	}
	gm.act = groupAct{kind: "poll", member: c.id}
	res, err := p.Owner.Poll(w.Ctx, req)
	gm.act = groupAct{}
	if err != nil {
		w.noteErr(err)
		if requester == nil && o.race == "" && pr.pos >= p.Engine.State().LogStart && pr.pos <= p.Engine.State().HighWatermark && !w.Broken() && !w.faultFired() {
			w.violate("%s: poll of %s from %d refused with %v, but it holds the partition at the epoch it states", p, c.id, pr.pos, err)
		}
		delete(c.procs, k) // load again
		return out + "refused: " + errClass(err) + raced, nil
	}
	if requester != nil {
		w.violate("%s: poll of %s at epoch %d accepted, but %v", p, c.id, c.epoch, requester)
	}
	tok := res.Token
	if !w.accepts(p, c.id, tok) {
		w.violate("%s: poll of %s completed with token %v, which the owner no longer accepts", p, c.id, tok)
	}
	recs, derr := decode(res.Batches, tok.From)
	if derr != nil {
		w.violate("%s: poll returned a bad batch: %v", p, derr)
		return "", nil
	}
	at := p.Engine.State()
	at.LogStart, at.HighWatermark, at.History = res.State.LogStart, res.State.HighWatermark, res.State.History
	p.m.observe("a state member's poll", recs, at)
	p.m.visibleEnd = max(p.m.visibleEnd, at.HighWatermark)
	for _, r := range recs {
		if r.off < res.Next && pr.covered.contains(int64(r.off)) {
			w.violate("%s: %s reads offset %d again, which its state already counts", p, c.id, r.off)
		}
		key := stateKeyOf(r.value)
		pr.counts[key]++
		pr.dirty[key] = true
		pr.covered = pr.covered.add(int64(r.off), int64(r.off)+1)
	}
	pr.pos = res.Next
	gt := gtoken{tok: tok, gen: gm.gen}
	pr.tok, c.tokens[k] = gt, gt
	if tok.Next > tok.From && w.Rng.IntN(3) == 0 {
		if t, off, sc, ok := w.pendingCommit(c, k); ok {
			gm.late = append(gm.late, lateCommit{member: c.id, part: k, tok: t, offset: off, state: sc})
			if len(gm.late) > 8 {
				gm.late = gm.late[1:]
			}
		}
	}
	return fmt.Sprintf("%s%d records from %d, next %d (member epoch %d, assignment %d)%s",
		out, len(recs), tok.From, res.Next, tok.MemberEpoch, tok.AssignmentEpoch, raced), nil
}

// contains reports whether off lies in s.
func (s spans) contains(off int64) bool {
	for _, x := range s {
		if x.lo <= off && off < x.hi {
			return true
		}
	}
	return false
}

// checkStores checks, for every live partition, that the group's state
// store holds the state registered with the bookmark stored beside it.
func (w *World) checkStores() {
	for _, p := range w.Live() {
		snap, err := p.Owner.InspectState(w.Ctx, simGroup, owner.StateQuery{})
		if err != nil {
			if !w.Broken() {
				w.violate("%s: inspect state: %v", p, err)
			}
			continue
		}
		got := map[string]int64{}
		for _, e := range snap.Entries {
			n, _ := strconv.ParseInt(string(e.Value), 10, 64)
			got[string(e.Key)] = n
		}
		c := p.m.consumers[groupConsumer]
		var b owner.Bookmark
		ok := false
		if c != nil {
			b, ok = c.bookmark()
		}
		switch {
		case snap.HasCommitted != ok || ok && snap.Committed != b:
			w.violate("%s: the store's bookmark is %v (%v), the one written %v (%v)", p, snap.Committed, snap.HasCommitted, b, ok)
		case !ok && len(got) > 0:
			w.violate("%s: state %v stored without a committed offset", p, got)
		case ok:
			if sw := p.m.states[b]; sw == nil || !maps.Equal(sw.counts, got) {
				var want map[string]int64
				if sw != nil {
					want = sw.counts
				}
				w.violate("%s: the store holds %v at %d@h%d; the state committed with that offset is %v", p, got, b.Offset, b.History, want)
			}
		}
	}
}
