package owner_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// Polls that share a key come and go in any order: two polls park for
// one key, the first gives up (its server shut down), a third parks for
// the key, and the key's command wakes both that remain, and nothing of
// the one that left.
func TestPollsOfOneKeyLeaveAndJoinItsList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
		key := owner.KeyMatch{Key: []byte("device-7")}
		poll := func(stop <-chan struct{}) <-chan owner.PartitionResult {
			out := make(chan owner.PartitionResult, 1)
			go func() {
				polls := []owner.PartitionPoll{{Owner: o, Request: owner.PollRequest{From: owner.FromEnd, Key: key}}}
				out <- owner.PollManyUntil(ctx, polls, time.Hour, owner.Interrupts{stop}, nil)[0]
			}()
			synctest.Wait()
			return out
		}
		shutdown := make(chan struct{})
		first, second := poll(shutdown), poll(nil)
		if st := o.KeyPolls(); st.Parked != 2 {
			t.Fatalf("two polls of one key: %+v parked, want 2", st)
		}
		close(shutdown)
		if res := <-first; res.Err == nil {
			t.Fatalf("the poll whose server shut down answered %v, want an error", res.Result)
		}
		third := poll(nil)
		if st := o.KeyPolls(); st.Parked != 2 {
			t.Fatalf("after one left and one joined: %+v parked, want 2", st)
		}
		if _, err := o.Produce(ctx, ownertest.KeyedBatch(t, "device-7", "reboot")); err != nil {
			t.Fatal(err)
		}
		for _, ch := range []<-chan owner.PartitionResult{second, third} {
			res := <-ch
			if got := keyedRecords(t, res.Result); res.Err != nil || len(got) != 1 || got[0] != "0:device-7=reboot" {
				t.Fatalf("a poll of the key got %v, %v; want the command", got, res.Err)
			}
		}
		if st := o.KeyPolls(); st.Parked != 0 || st.Woken != 2 {
			t.Fatalf("after the command: %+v, want none parked and 2 woken", st)
		}
	})
}
