package transform

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/record"
)

// On the storage engine, which hands each written batch's memory back to
// the runner for its next batch, every output record is its input, once
// and in order: no batch is built in memory the engine still holds. The
// input comes in rounds of four batches of 600 KB, one step each (a step
// polls 1 MiB at most). For the second half of the run a consumer reads
// the output at its end, which has the engine keep the batches it writes
// in its tail cache and serve them from there (they are never handed
// back): it reads every record as it was input.
func TestOnTheEngineEveryOutputIsItsInput(t *testing.T) {
	w := newEngineWorld(t, t.TempDir(), engine.DurabilityNone)
	defer w.mgr.Close()
	w.createTopic("in", 1)
	w.createTopic("out", 1)
	addPass(t, w, "copy")
	out := w.topics["out"].owners[0]
	var sent, tailed []string
	next := uint64(0) // the tailing consumer's position
	pad := strings.Repeat("x", 4000)
	for b := range 20 {
		for i := range 4 {
			vs := numbered(fmt.Sprintf("b%02d-%d-", b, i), 0, 50)
			for j := range vs {
				vs[j] += pad
			}
			w.produce("in", 0, vs...)
			sent = append(sent, vs...)
		}
		w.waitFor("the transform caught up", w.caughtUp("copy"))
		if b < 10 {
			next = out.State().HighWatermark
			tailed = append([]string(nil), sent...)
			continue
		}
		for next < out.State().HighWatermark {
			res, err := out.Poll(context.Background(), owner.PollRequest{From: owner.FromOffset, Offset: next})
			if err != nil {
				t.Fatal(err)
			}
			for _, batch := range res.Batches {
				it, err := record.NewRecordIterator(batch, 0)
				if err != nil {
					t.Fatal(err)
				}
				for r, ok := it.Next(); ok; r, ok = it.Next() {
					if r.Offset >= next && r.Offset < res.Next {
						tailed = append(tailed, string(r.Value))
					}
				}
			}
			next = res.Next
			res.Release()
		}
		if i := firstDiff(tailed, sent); i >= 0 {
			t.Fatalf("after round %d the consumer at the output's end read %d records, want the %d inputs once each in order; record %d differs",
				b, len(tailed), len(sent), i)
		}
	}
	if i := firstDiff(values(w.read("out", 0)), sent); i >= 0 {
		t.Fatalf("the output is not the input, once each and in order: record %d differs", i)
	}
}

// firstDiff is the first index where got and want differ (a record's
// value, or one's absence), or -1.
func firstDiff(got, want []string) int {
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			return i
		}
	}
	return -1
}
