package session

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/record"
)

// dropValues is a filter Transform that keeps the stored batches whose
// records' values are not drop (test batches hold one value each).
func dropValues(t *testing.T, drop string) func(context.Context, uint64, owner.ReadResult) (owner.ReadResult, error) {
	return func(_ context.Context, _ uint64, res owner.ReadResult) (owner.ReadResult, error) {
		var kept [][]byte
		for _, b := range res.Batches {
			it, err := record.NewRecordIterator(b, 1<<20)
			if err != nil {
				t.Error(err)
				return owner.ReadResult{}, err
			}
			keep := false
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				keep = keep || string(r.Value) != drop
			}
			if keep {
				kept = append(kept, b)
			}
		}
		return owner.ReadResult{Batches: kept, Next: res.Next}, nil
	}
}

// A long poll whose filter drops every record it reads parks again until
// its deadline, waking on new records, instead of answering empty early;
// the position still moves past the dropped records, for "next" and for
// an explicit position alike.
//
// covers: G62
func TestFilteredLongPollParksAgainUntilItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		l := ownertest.NewLog(m, "t/0")
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, l)
		produce := func(vs ...string) {
			for _, v := range vs {
				if _, err := o.Produce(ctx, ownertest.Batch(t, v)); err != nil {
					t.Fatal(err)
				}
			}
		}
		produce("drop", "drop")
		c := owner.Consumer{Name: "c"}
		var nextOfC uint64
		for _, req := range []owner.PollRequest{
			{Consumer: c, From: owner.FromNext, Transform: dropValues(t, "drop")},
			{From: owner.FromEnd, Transform: dropValues(t, "drop")},
		} {
			polls := []owner.PartitionPoll{{Owner: o, Request: req}}
			start := time.Now()
			var out []owner.PartitionResult
			done := make(chan struct{})
			go func() { out = pollKept(ctx, polls, time.Minute); close(done) }()
			synctest.Wait()
			select {
			case <-done:
				t.Fatalf("a poll whose filter dropped everything answered early: %+v", out)
			default:
			}
			// More dropped records wake it; it parks again.
			time.Sleep(10 * time.Second)
			produce("drop")
			synctest.Wait()
			select {
			case <-done:
				t.Fatalf("answered on dropped records: %+v", out)
			default:
			}
			// A record the filter keeps answers it, at once.
			time.Sleep(10 * time.Second)
			produce("keep")
			<-done
			if d := time.Since(start); d != 20*time.Second {
				t.Fatalf("answered after %v, want 20s", d)
			}
			r := out[0]
			if r.Err != nil || len(r.Result.Batches) != 1 || r.Result.Next != l.State().HighWatermark {
				t.Fatalf("from %v: %+v", req.From, r)
			}
			if r.Result.Token.From != r.Result.Next-1 {
				t.Fatalf("the token covers [%d, %d): want only the last poll's positions", r.Result.Token.From, r.Result.Token.Next)
			}

			// Nothing but dropped records until the deadline: empty at the
			// deadline, past them.
			produce("drop")
			if req.From != owner.FromNext {
				polls[0].Request = owner.PollRequest{From: owner.FromOffset, Offset: r.Result.Next, Transform: req.Transform}
			}
			start = time.Now()
			out = pollKept(ctx, polls, time.Minute)
			if d := time.Since(start); d != time.Minute || out[0].Err != nil || len(out[0].Result.Batches) != 0 ||
				out[0].Result.Next != l.State().HighWatermark {
				t.Fatalf("after %v: %+v", d, out[0])
			}
			if req.From == owner.FromNext {
				nextOfC = out[0].Result.Next
			}
			produce("keep")
		}
		// The named consumer moved past every dropped record: it goes on
		// from where its last filtered poll ended.
		res, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext})
		if err != nil || res.Token.From != nextOfC || nextOfC == 0 {
			t.Fatalf("next after the filtered polls: %+v %v", res, err)
		}

		// An immediate poll answers at once, empty.
		produce("drop")
		start := time.Now()
		out := pollKept(ctx, []owner.PartitionPoll{{Owner: o, Request: owner.PollRequest{Consumer: c, From: owner.FromNext, Transform: dropValues(t, "drop")}}}, 0)
		if time.Since(start) != 0 || out[0].Err != nil || len(out[0].Result.Batches) != 0 || out[0].Result.Next != l.State().HighWatermark {
			t.Fatalf("immediate poll: %+v", out[0])
		}
	})
}
