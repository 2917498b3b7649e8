package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/record"
)

// readRecord is one record a read returned.
type readRecord struct {
	off   uint64
	value string
}

// decode returns the records of batches at or after from.
func decode(batches [][]byte, from uint64) ([]readRecord, error) {
	var out []readRecord
	for _, b := range batches {
		it, err := record.NewRecordIterator(b, 0)
		if err != nil {
			return nil, err
		}
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			if r.Offset >= from {
				out = append(out, readRecord{off: r.Offset, value: string(r.Value)})
			}
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readLog reads a partition from from to hw through the engine (not an
// owner: no consumer's position moves).
func readLog(p *engine.Partition, from, hw uint64) ([]readRecord, error) {
	var out []readRecord
	for from < hw {
		plan, err := p.PlanRead(from, 64<<10)
		if err != nil {
			return out, err
		}
		res, err := plan.Execute(context.Background())
		plan.Release()
		if err != nil {
			return out, err
		}
		recs, err := decode(res.Batches, from)
		if err != nil {
			return out, err
		}
		for _, r := range recs {
			if r.off < hw {
				out = append(out, r)
			}
		}
		if res.Next <= from {
			break
		}
		from = res.Next
	}
	return out, nil
}

// checkState checks a live partition's state after an op: its history
// against the model (purges lists the purges this op acknowledged), and
// notes what a reader can see now.
func (w *World) checkState(p *Partition, purges []fence.HistoryTransition) engine.PartitionState {
	st := p.Engine.State()
	p.m.checkLineage(st, purges, false)
	p.m.visibleEnd = max(p.m.visibleEnd, st.HighWatermark)
	return st
}

// checkFresh checks a topic just created: empty, first history, nothing
// of an earlier topic of the same name (no record, no bookmark, no file).
func (w *World) checkFresh(t *Topic) {
	for _, p := range t.Parts {
		st := p.Engine.State()
		if st.LogStart != 0 || st.HighWatermark != 0 || st.History != 1 || len(st.Lineage) != 1 {
			w.violate("%s: new topic is not empty: %+v", p, st)
		}
		_ = p.Engine.Bookmarks(func(consumer string, b engine.Bookmark) error {
			w.violate("%s: new topic has bookmark %q = %+v", p, consumer, b)
			return nil
		})
		names, err := w.Disk.Mem().List(partitionDir(t.ID, p.Index))
		if err != nil {
			w.violate("%s: directory of a new topic: %v", p, err)
		}
		if bases := segmentBases(names); len(bases) > 0 {
			w.violate("%s: new topic has segment files %v", p, bases)
		}
	}
}

// checkRestart checks the node after a restart. before holds the ids of
// the topics live before it.
func (w *World) checkRestart(before map[fence.TopicID]bool) {
	dirs, err := w.Disk.Mem().List("data/topics")
	if err != nil {
		w.violate("list topics: %v", err)
	}
	for _, id := range sortedIDs(w.models) {
		tm := w.models[id]
		live := w.topics[tm.name]
		isLive := live != nil && live.ID == id
		switch {
		case tm.deleted && isLive:
			w.violate("deleted topic %q (%s) came back", tm.name, id)
		case tm.deleting && !isLive:
			tm.deleted = true // the deletion was durable after all
		case !tm.deleted && before[id] && !isLive:
			w.violate("topic %q (%s) lost by a restart", tm.name, id)
		}
		tm.deleting = false
		if tm.deleted && slices.Contains(dirs, id.String()) {
			w.violate("the directory of deleted topic %q (%s) survived the recovery", tm.name, id)
		}
	}
	for _, p := range w.Live() {
		w.checkRecovered(p)
	}
}

func sortedIDs(m map[fence.TopicID]*topicModel) []fence.TopicID {
	ids := make([]fence.TopicID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b fence.TopicID) int { return slices.Compare(a[:], b[:]) })
	return ids
}

// checkRecovered checks one partition after a restart: it is served, its
// obligations are finished, its history is explained, what must have
// survived did, what may not come back did not, and its consumers'
// bookmarks are ones that were written.
func (w *World) checkRecovered(p *Partition) {
	m := p.m
	st := p.Engine.State()
	if st.Failed != nil {
		w.violate("%s: not served after recovery: %v", p, st.Failed)
		return
	}
	if st.CleanupPending {
		w.violate("%s: recovery serves with a cleanup obligation pending", p)
	}
	names, err := w.Disk.Mem().List(partitionDir(p.Topic.ID, p.Index))
	if err != nil {
		w.violate("%s: %v", p, err)
	}
	bases := segmentBases(names)
	for i := 0; i+1 < len(bases); i++ {
		if bases[i+1] <= st.LogStart {
			w.violate("%s: segment %d lies below the start %d after recovery", p, bases[i], st.LogStart)
		}
	}
	var fresh []fence.HistoryTransition
	if len(st.Lineage) >= len(m.lineage) {
		fresh = st.Lineage[len(m.lineage):]
	}
	m.checkLineage(st, nil, true)

	recs, err := readLog(p.Engine, st.LogStart, st.HighWatermark)
	if err != nil {
		w.violate("%s: read after recovery: %v", p, err)
		return
	}
	m.observe("the read after recovery", recs, st)
	present := make(map[uint64]bool, len(recs))
	for _, r := range recs {
		present[r.off] = true
	}
	offs := make([]uint64, 0, len(m.values))
	for off := range m.values {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	m.checkKeptEnd(w, p, fresh, offs, present, st.LogStart)
	for _, off := range offs {
		if off < st.LogStart || m.lost[off] {
			continue
		}
		if present[off] {
			if m.failedAppends[off] {
				w.violate("%s: offset %d came back, but its append failed: recovery kept more than was durable", p, off)
			}
			continue
		}
		if m.acked[off] && m.topic.cfg.Durability == engine.DurabilityAlways {
			w.violate("%s: acknowledged offset %d (%q) lost under durability always", p, off, m.values[off])
		}
		if off < m.visibleEnd && !m.refused[off] && !slices.ContainsFunc(fresh, func(tr fence.HistoryTransition) bool {
			return tr.Kind == fence.TransitionLossyRecovery && tr.KeptEnd <= off
		}) {
			w.violate("%s: offset %d, which readers could see, was lost without a lossy recovery (new transitions %v)", p, off, fresh)
		}
		m.lost[off] = true
	}
	if m.topic.cfg.Durability == engine.DurabilityAlways {
		m.forgetUnseen(st, present)
	}
	presentEnd := st.LogStart
	for off := range present {
		presentEnd = max(presentEnd, off+1)
	}
	if skipped := st.Skipped(presentEnd, st.HighWatermark); skipped != st.HighWatermark-presentEnd {
		w.violate("%s: numbering resumes at %d after the log's last record at %d, but %d offsets between are recorded as skipped (gaps %v)", p, st.HighWatermark, presentEnd, skipped, st.Gaps)
	}
	m.visibleEnd = st.HighWatermark
	if st.LogStart > 0 {
		if _, err := p.Engine.PlanRead(st.LogStart-1, 1); !errors.As(err, new(*engine.OutOfRangeError)) {
			w.violate("%s: a read below the start %d was not refused: %v", p, st.LogStart, err)
		}
	}
	for _, name := range sortedKeys(m.consumers) {
		c := m.consumers[name]
		c.delivered, c.deliveredUnknown = nil, false
		if c.key == "" {
			continue
		}
		b, ok, err := p.Engine.Bookmark(c.key)
		if err != nil {
			w.violate("%s: bookmark of %s: %v", p, name, err)
			continue
		}
		nb := owner.Bookmark{Offset: b.Offset, History: b.History}
		switch {
		case !ok && c.durable != nil:
			w.violate("%s: durable bookmark %+v of %s lost", p, *c.durable, name)
		case ok && !(c.durable != nil && *c.durable == nb) && !slices.Contains(c.later, nb):
			w.violate("%s: bookmark of %s is %+v after recovery; it was durably %v, later %v", p, name, nb, c.durable, c.later)
		}
		if name == groupConsumer {
			// A state written with a bookmark the crash lost is lost with
			// it: the same offset may be committed again with another.
			for _, lb := range c.later {
				if !(ok && lb == nb) && !(c.durable != nil && *c.durable == lb) {
					delete(m.states, lb)
				}
			}
		}
		if ok {
			c.durable, c.later = &nb, nil
			if _, err := resolve(nb, st); err != nil {
				w.violate("%s: bookmark of %s: %v", p, name, err)
			}
		} else {
			c.durable, c.later = nil, nil
		}
	}
}

// forgetUnseen checks a recovery under durability always, which must
// skip no offset: readers saw only fsynced records and the log keeps
// every one, so numbering resumes at the log's end (or at what readers
// saw, if a purge or an earlier recovery published more). The offsets
// handed out past it were neither acknowledged nor seen: the model
// forgets them, and they may be handed out again.
func (m *partModel) forgetUnseen(st engine.PartitionState, present map[uint64]bool) {
	end := max(st.LogStart, m.visibleEnd)
	for off := range present {
		end = max(end, off+1)
	}
	if st.HighWatermark != end || len(st.Gaps) != 0 {
		m.w.violate("%s: durability always: numbering resumes at %d (gaps %v), not at the log's end %d", m, st.HighWatermark, st.Gaps, end)
	}
	for off := range m.values {
		if off >= st.HighWatermark {
			delete(m.values, off)
			delete(m.acked, off)
			delete(m.lost, off)
			delete(m.failedAppends, off)
			delete(m.refused, off)
		}
	}
	m.handedEnd = st.HighWatermark
}

// checkKeptEnd checks that a lossy recovery says it kept everything that
// did survive up to the first record it lost: a consumer whose bookmark
// is above the kept end is moved past every record below the new
// history's start, so a kept end below a surviving record would have
// consumers skip records that are still there. offs are the offsets
// handed out, in order; present, those the recovered log holds.
func (m *partModel) checkKeptEnd(w *World, p *Partition, fresh []fence.HistoryTransition, offs []uint64, present map[uint64]bool, start uint64) {
	firstLost := uint64(math.MaxUint64)
	for _, off := range offs {
		if off >= start && !present[off] && !m.lost[off] {
			firstLost = off
			break
		}
	}
	for _, tr := range fresh {
		if tr.Kind != fence.TransitionLossyRecovery {
			continue
		}
		for _, off := range offs {
			if off >= max(start, tr.KeptEnd) && off < firstLost && present[off] {
				w.violate("%s: the lossy recovery kept only below %d, but offset %d survived, and nothing below it was lost: consumers past %d skip it", p, tr.KeptEnd, off, tr.KeptEnd)
				break
			}
		}
	}
}

// describeState tells a partition's offsets, history and health.
func describeState(p *Partition) string {
	st := p.Engine.State()
	var lin []string
	for _, tr := range st.Lineage {
		s := fmt.Sprintf("%s@%d", tr.Kind, tr.Start)
		if tr.Kind == fence.TransitionLossyRecovery {
			s += fmt.Sprintf(" kept<%d", tr.KeptEnd)
		}
		lin = append(lin, s)
	}
	out := fmt.Sprintf("start %d, high watermark %d, history %d (%s)", st.LogStart, st.HighWatermark, st.History, strings.Join(lin, ", "))
	if st.CleanupPending {
		out += ", cleanup pending"
	}
	if st.Failed != nil {
		out += ", failed: " + errClass(st.Failed)
	}
	return out
}
