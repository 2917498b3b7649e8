package owner_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/record"
	"pgregory.net/rapid"
)

// modelConsumer is what the model expects of one consumer polling "next".
type modelConsumer struct {
	name   string
	auto   owner.AutoCommit
	next   uint64             // where its next poll must start
	epoch  fence.HistoryEpoch // history of next
	inPoll *owner.PendingPoll // its poll in flight, planned but not completed
	req    owner.PollRequest
	last   fence.Token // token of its last delivery
}

// TestOwnerModel runs random interleavings of appends, purges, and polls
// that are planned, left pending, and completed later (the shape of a read
// suspended at the disk), for consumers committing on delivery, on the next
// poll, and manually, against a model of where each must resume. Every
// completion either is refused as stale (and changes nothing) or delivers
// exactly from where the consumer must continue: nothing skipped, nothing
// repeated, nothing from a purged history.
//
// covers: G1 G2 G6
func TestOwnerModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		l := ownertest.NewLog(m, "t/0")
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, l)
		consumers := []*modelConsumer{
			{name: "delivery", auto: owner.AutoCommitOnDelivery},
			{name: "nextpoll", auto: owner.AutoCommitOnNextPoll},
			{name: "manual", auto: owner.AutoCommitOff},
		}
		for _, c := range consumers {
			c.epoch = 1
			c.req = owner.PollRequest{Consumer: owner.Consumer{Name: c.name}, From: owner.FromNext, AutoCommit: c.auto, MaxBytes: 1}
		}
		values := map[uint64]string{} // offset -> value of every record appended
		n := 0
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			c := consumers[rapid.IntRange(0, len(consumers)-1).Draw(rt, "consumer")]
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0: // append a batch
				var b record.BatchBuilder
				for range rapid.IntRange(1, 3).Draw(rt, "records") {
					n++
					b.Append(record.Record{Timestamp: 1, Value: fmt.Appendf(nil, "v%d", n)})
				}
				batch, _ := b.Build(record.CompressionNone)
				r, err := o.Produce(ctx, batch)
				if err != nil {
					rt.Fatal(err)
				}
				for off := r.Base; off <= r.Last; off++ {
					values[off] = fmt.Sprintf("v%d", n-int(r.Last-off))
				}
			case 1: // purge
				st, err := o.Purge(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				for _, c := range consumers {
					if c.epoch < st.History {
						c.next, c.epoch = st.LogStart, st.History
					}
				}
			case 2: // plan a poll (the read is left pending)
				if c.inPoll != nil {
					continue
				}
				p, err := o.PlanPoll(c.req)
				if err != nil {
					rt.Fatalf("%s: plan: %v", c.name, err)
				}
				if st := o.State(); p.Token().From != c.next || st.History != c.epoch {
					rt.Fatalf("%s: planned from %d@h%d, model says %d@h%d", c.name, p.Token().From, st.History, c.next, c.epoch)
				}
				c.inPoll = &p
			case 3: // complete the pending read
				if c.inPoll == nil {
					continue
				}
				p := *c.inPoll
				c.inPoll = nil
				before := o.State()
				res, err := o.CompletePoll(ctx, c.req, p)
				if errors.Is(err, fence.ErrStaleHistory) {
					if p.Token().History == before.History {
						rt.Fatalf("%s: refused as stale in its own history", c.name)
					}
					continue
				}
				if err != nil {
					rt.Fatalf("%s: complete: %v", c.name, err)
				}
				if p.Token().History != before.History {
					rt.Fatalf("%s: a poll planned in history %d completed in %d", c.name, p.Token().History, before.History)
				}
				got := ownertest.RecordsOf(rt, res)
				var want []string
				for off := res.Token.From; off < res.Token.Next; off++ {
					want = append(want, values[off])
				}
				if res.Token.From != c.next || !slices.Equal(got, want) || res.Token.From < before.LogStart {
					rt.Fatalf("%s: delivered %v from %d, model expects from %d (%v)", c.name, got, res.Token.From, c.next, want)
				}
				c.next, c.last = res.Token.Next, res.Token
			case 4: // manual commit of the last delivery
				if c.auto != owner.AutoCommitOff || c.last.IsZero() {
					continue
				}
				err := o.Commit(ctx, owner.CommitRequest{Consumer: c.req.Consumer, Token: c.last, Offset: c.last.Next})
				if c.last.History != o.State().History {
					if !errors.Is(err, fence.ErrStaleHistory) {
						rt.Fatalf("%s: commit of an old history: %v", c.name, err)
					}
				} else if err != nil && !errors.Is(err, fence.ErrCommitBackwards) {
					rt.Fatalf("%s: commit: %v", c.name, err)
				}
			}
		}
		// The stored bookmarks never come from a history other than the
		// one they were checked in, and resolve to at most where each
		// consumer continues.
		st := o.State()
		for _, c := range consumers {
			b, ok, _ := l.Bookmark("c/" + c.name)
			if !ok {
				continue
			}
			res, err := fence.ResolveBookmark(st, l.Lineage(), b.Offset, b.History)
			if err != nil || res.Offset > c.next && c.epoch == st.History {
				rt.Fatalf("%s: bookmark %+v resolves to %+v (%v), consumer continues at %d", c.name, b, res, err, c.next)
			}
		}
	})
}
