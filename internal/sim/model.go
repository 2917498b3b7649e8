package sim

import (
	"fmt"
	"slices"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
)

// The model is what the simulator knows independently of the code under
// test: every record it appended and what became of it, the history
// transitions it caused, and every bookmark the owners wrote. The checks
// compare what the code reports with it.

// topicModel is one creation of a topic (one topic id).
type topicModel struct {
	name  string
	id    fence.TopicID
	cfg   engine.TopicConfig
	parts []*partModel
	// deleted: the deletion was acknowledged. deleting: it was attempted
	// and failed, so a restart may find the topic either way.
	deleted, deleting bool
}

// partModel is one partition of a topic creation.
type partModel struct {
	w     *World
	topic *topicModel
	index int

	// values holds every offset ever handed out with the value of its
	// record: an offset never holds another record, not after a purge,
	// not after a crash (except, under always, an offset past the log's
	// end at a recovery: never acknowledged nor seen, it is forgotten).
	values map[uint64]string
	// acked: appends acknowledged to the producer.
	acked map[uint64]bool
	// lost: offsets handed out that a recovery did not keep; they may
	// never come back.
	lost map[uint64]bool
	// failedAppends: offsets of appends that failed while the metadata
	// store worked; never durable, they may not appear after a restart.
	failedAppends map[uint64]bool
	// refused: offsets of appends refused for a full disk: never written,
	// so never seen by a reader.
	refused map[uint64]bool
	// handedEnd is the exclusive end of every offset handed out.
	handedEnd uint64
	// visibleEnd is the highest high watermark a reader could have seen.
	visibleEnd uint64
	// start is the highest start offset acknowledged or observed.
	start uint64
	// lineage is the partition's history as last observed.
	lineage []fence.HistoryTransition
	// purgesInDoubt are purges that failed since the last restart: the
	// restart may find one of them done.
	purgesInDoubt []fence.HistoryTransition

	consumers map[string]*consumerModel
	// states are the states committed with the group's bookmarks (the
	// state-store simulation).
	states map[owner.Bookmark]*stateWrite
}

// consumerModel is a named consumer's progress as the model knows it.
type consumerModel struct {
	name string
	mode owner.AutoCommit
	// key is the bookmark key the owner writes for it (learnt at its first
	// write).
	key string
	// delivered is the owner's delivered position: where "next" continues
	// while its history is current. Memory only: a restart forgets it.
	delivered *owner.Bookmark
	// deliveredUnknown: a commit-on-delivery poll failed after its
	// completion may have moved the delivered position.
	deliveredUnknown bool
	// durable is the last bookmark known durable; later are those written
	// since, in order, any of which a power loss may keep.
	durable *owner.Bookmark
	later   []owner.Bookmark
	// tok is the token of its last delivery (for manual commits).
	tok fence.Token
}

func newTopicModel(w *World, name string, id fence.TopicID, cfg engine.TopicConfig) *topicModel {
	tm := &topicModel{name: name, id: id, cfg: cfg}
	for i := 0; i < cfg.Partitions; i++ {
		tm.parts = append(tm.parts, &partModel{
			w: w, topic: tm, index: i,
			values: map[uint64]string{}, acked: map[uint64]bool{}, lost: map[uint64]bool{},
			failedAppends: map[uint64]bool{},
			refused:       map[uint64]bool{},
			lineage:       []fence.HistoryTransition{{Epoch: 1, Start: 0, Kind: fence.TransitionCreate}},
			consumers:     map[string]*consumerModel{},
			states:        map[owner.Bookmark]*stateWrite{},
		})
	}
	return tm
}

func (m *partModel) String() string {
	return fmt.Sprintf("%s/%d", m.topic.name, m.index)
}

func (m *partModel) consumer(name string, mode owner.AutoCommit) *consumerModel {
	c := m.consumers[name]
	if c == nil {
		c = &consumerModel{name: name, mode: mode}
		m.consumers[name] = c
	}
	return c
}

// bookmark returns the consumer's bookmark as the owner last wrote it.
func (c *consumerModel) bookmark() (owner.Bookmark, bool) {
	if n := len(c.later); n > 0 {
		return c.later[n-1], true
	}
	if c.durable != nil {
		return *c.durable, true
	}
	return owner.Bookmark{}, false
}

// bookmarkWritten implements bookmarkObserver: an owner ordered a bookmark
// write for the consumer on whose behalf the current op runs.
func (m *partModel) bookmarkWritten(key string, b owner.Bookmark, st engine.PartitionState, err error) {
	w := m.w
	if b.History != st.History {
		w.violate("%s: the owner wrote a bookmark of history %d while the history is %d", m, b.History, st.History)
	}
	if b.Offset < st.LogStart || b.Offset > st.HighWatermark {
		w.violate("%s: the owner wrote bookmark %d outside [%d, %d]", m, b.Offset, st.LogStart, st.HighWatermark)
	}
	if err != nil {
		return
	}
	c := m.consumers[w.consumer]
	if c == nil {
		w.violate("%s: a bookmark %q written outside any consumer's op", m, key)
		return
	}
	if c.key != "" && c.key != key {
		w.violate("%s: consumer %s wrote bookmark key %q, earlier %q", m, c.name, key, c.key)
	}
	if key == groupConsumerKey {
		m.groupBookmarkWritten(b, st)
	}
	c.key = key
	c.later = append(c.later, b)
}

// syncedAll notes that every bookmark written so far is durable: a synced
// metadata write covers every earlier one.
func (w *World) syncedAll() {
	for _, tm := range w.models {
		for _, m := range tm.parts {
			for _, c := range m.consumers {
				if b, ok := c.bookmark(); ok {
					c.durable, c.later = &b, nil
				}
			}
		}
	}
}

// expectedNext is where a "next" poll of c must start, by the rules of
// docs/FENCING.md (section 2), computed from the model's knowledge.
func (m *partModel) expectedNext(c *consumerModel, st engine.PartitionState) (uint64, error) {
	if d := c.delivered; d != nil && d.History == st.History {
		if d.Offset >= st.LogStart {
			return d.Offset, nil
		}
		return st.LogStart, nil
	}
	b, ok := c.bookmark()
	if !ok {
		return st.LogStart, nil
	}
	return resolve(b, st)
}

// resolve is the model's resolution of a bookmark in the state's history:
// a purge (or creation) since moves it to the transition's start; a lossy
// recovery keeps it if everything before it survived and moves it to the
// new epoch's start otherwise; a moved position below the start becomes
// the start, an unmoved one outside [start, hw] follows the reset policy
// (earliest here).
func resolve(b owner.Bookmark, st engine.PartitionState) (uint64, error) {
	i := slices.IndexFunc(st.Lineage, func(tr fence.HistoryTransition) bool { return tr.Epoch == b.History })
	if i < 0 {
		return 0, fmt.Errorf("bookmark of history %d, which is not in the lineage %v", b.History, st.Lineage)
	}
	off, moved := b.Offset, false
	for _, tr := range st.Lineage[i+1:] {
		if tr.Kind != fence.TransitionLossyRecovery || off > tr.KeptEnd {
			off, moved = tr.Start, true
		}
	}
	switch {
	case moved && off < st.LogStart:
		return st.LogStart, nil
	case !moved && (off < st.LogStart || off > st.HighWatermark):
		return st.LogStart, nil
	}
	return off, nil
}

// checkLineage checks the partition's history against the model's: the
// lineage extends the one known (history is never rewritten, so no epoch
// repeats), its epochs increase, it ends at the current epoch, and every
// new transition is explained: purge lists the purges acknowledged by this
// op; at a restart a purge in doubt may appear, and under interval and
// none a lossy recovery.
func (m *partModel) checkLineage(st engine.PartitionState, purges []fence.HistoryTransition, restart bool) {
	w := m.w
	lin := st.Lineage
	switch {
	case len(lin) == 0 || lin[len(lin)-1].Epoch != st.History:
		w.violate("%s: lineage %v does not end at history %d", m, lin, st.History)
		return
	case len(lin) < len(m.lineage) || !slices.Equal(lin[:len(m.lineage)], m.lineage):
		w.violate("%s: history rewritten: lineage was %v, is %v", m, m.lineage, lin)
		return
	}
	for i := 1; i < len(lin); i++ {
		if lin[i].Epoch <= lin[i-1].Epoch || lin[i].Start < lin[i-1].Start {
			w.violate("%s: lineage %v does not increase", m, lin)
		}
	}
	for _, tr := range lin[len(m.lineage):] {
		switch {
		case len(purges) > 0 && tr == purges[0]:
			purges = purges[1:]
		case restart && slices.Contains(m.purgesInDoubt, tr):
		case restart && tr.Kind == fence.TransitionLossyRecovery:
			if m.topic.cfg.Durability == engine.DurabilityAlways {
				w.violate("%s: lossy recovery %+v under durability always", m, tr)
			}
			if tr.Start < m.handedEnd || tr.KeptEnd > tr.Start {
				w.violate("%s: lossy recovery %+v does not number above every offset handed out (%d)", m, tr, m.handedEnd)
			}
		default:
			w.violate("%s: unexplained history transition %+v (lineage was %v)", m, tr, m.lineage)
		}
	}
	if len(purges) > 0 {
		w.violate("%s: acknowledged purge %+v missing from lineage %v", m, purges[0], lin)
	}
	if st.LogStart < m.start {
		w.violate("%s: start offset went back from %d to %d", m, m.start, st.LogStart)
	}
	m.lineage = slices.Clone(lin)
	m.start = max(m.start, st.LogStart)
	if restart {
		m.purgesInDoubt = nil
	}
}

// observe checks records a read returned against the model: each is at or
// above the start offset and below the high watermark, holds the value
// appended at its offset, and comes after the one before.
func (m *partModel) observe(what string, recs []readRecord, st engine.PartitionState) {
	w := m.w
	prev := int64(-1)
	for _, r := range recs {
		switch want, ok := m.values[r.off]; {
		case r.off < st.LogStart:
			w.violate("%s: %s returned offset %d below the start %d", m, what, r.off, st.LogStart)
		case r.off >= st.HighWatermark:
			w.violate("%s: %s returned offset %d at or above the high watermark %d", m, what, r.off, st.HighWatermark)
		case int64(r.off) <= prev:
			w.violate("%s: %s returned offset %d after %d", m, what, r.off, prev)
		case !ok:
			w.violate("%s: %s returned offset %d (%q), which was never handed out", m, what, r.off, r.value)
		case want != r.value:
			w.violate("%s: %s returned %q at offset %d, which holds %q: an offset was reused", m, what, r.value, r.off, want)
		case m.lost[r.off]:
			w.violate("%s: %s returned offset %d (%q), which was lost earlier", m, what, r.off, r.value)
		}
		prev = int64(r.off)
	}
}
