package owner_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/record"
)

// keyedRecords returns the offsets, keys and values of a poll's batches.
func keyedRecords(t *testing.T, res owner.PollResult) []string {
	t.Helper()
	var out []string
	for _, b := range res.Batches {
		h, err := record.VerifyBatch(b, record.BatchMaxSize)
		if err != nil {
			t.Fatal(err)
		}
		if h.ProducerID != 0 {
			t.Fatalf("a key poll's batch carries producer %d: it is node-built", h.ProducerID)
		}
		it, err := record.NewRecordIterator(b, record.BatchMaxSize)
		if err != nil {
			t.Fatal(err)
		}
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			out = append(out, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, r.Value))
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	return out
}

// A thousand devices park a key poll each on one partition; a command to
// one of them wakes that poll alone, which delivers it, and the others
// answer empty when their wait runs out.//
// covers: G63
func TestCommandWakesOnlyItsDevicesPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
		const devices = 1000
		type answer struct {
			device int
			res    owner.PollResult
			err    error
		}
		answers := make(chan answer, devices)
		for d := range devices {
			go func() {
				res, err := o.Poll(ctx, owner.PollRequest{
					From: owner.FromEnd, MaxWait: time.Minute,
					Key: owner.KeyMatch{Key: fmt.Appendf(nil, "device-%04d", d)},
				})
				answers <- answer{d, res, err}
			}()
		}
		synctest.Wait()
		if st := o.KeyPolls(); st.Parked != devices || st.Woken != 0 {
			t.Fatalf("before the command: %+v, want %d parked, none woken", st, devices)
		}

		if _, err := o.Produce(ctx, ownertest.KeyedBatch(t, "device-0042", "reboot")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st := o.KeyPolls(); st.Woken != 1 || st.Parked != devices-1 {
			t.Fatalf("after one command: %+v, want 1 woken and %d parked", st, devices-1)
		}
		a := <-answers
		if a.err != nil || a.device != 42 {
			t.Fatalf("first answer: device %d, %v; want device 42", a.device, a.err)
		}
		if got := keyedRecords(t, a.res); len(got) != 1 || got[0] != "0:device-0042=reboot" || a.res.Next != 1 {
			t.Fatalf("device 42 got %v, next %d", got, a.res.Next)
		}

		time.Sleep(time.Minute)
		for range devices - 1 {
			a := <-answers
			if a.err != nil || len(a.res.Batches) != 0 {
				t.Fatalf("device %d: %d batches, %v; want none", a.device, len(a.res.Batches), a.err)
			}
		}
		if st := o.KeyPolls(); st.Woken != 1 || st.Parked != 0 {
			t.Fatalf("after the wait: %+v, want 1 woken, none parked", st)
		}
	})
}

// A key poll delivers only its key's records, in node-built batches with
// their original offsets, and its next passes the records of other keys,
// so a consumer resuming from it neither re-reads nor skips. A prefix poll
// delivers every key under its prefix.//
// covers: G63
func TestKeyPollDeliversItsKeysAndMovesPastTheOthers(t *testing.T) {
	ctx := context.Background()
	m := ownertest.NewMeta()
	o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
	for _, b := range [][]byte{
		ownertest.KeyedBatch(t, "a", "1", "b", "2", "a", "3"),
		ownertest.Batch(t, "null key"),
		ownertest.KeyedBatch(t, "ab", "4", "b", "5"),
	} {
		if _, err := o.Produce(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	c := owner.Consumer{Name: "dev"}
	res, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext, Key: owner.KeyMatch{Key: []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keyedRecords(t, res)); got != "[0:a=1 2:a=3]" || res.Next != 6 {
		t.Fatalf("key a: %s next %d, want [0:a=1 2:a=3] next 6", got, res.Next)
	}
	// The token covers every record read: committing next is valid.
	if err := o.Commit(ctx, owner.CommitRequest{Consumer: c, Token: res.Token, Offset: res.Next}); err != nil {
		t.Fatalf("commit of a key poll's next: %v", err)
	}

	res, err = o.Poll(ctx, owner.PollRequest{From: owner.FromFirst, Key: owner.KeyMatch{Key: []byte("a"), Prefix: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keyedRecords(t, res)); got != "[0:a=1 2:a=3 4:ab=4]" || res.Next != 6 {
		t.Fatalf("prefix a: %s next %d", got, res.Next)
	}

	// A long poll that reads only other keys moves past them and waits
	// for its own; what it delivers starts at its key's record.
	synctest.Test(t, func(t *testing.T) {
		m := ownertest.NewMeta()
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
		done := make(chan owner.PollResult, 1)
		go func() {
			res, err := o.Poll(ctx, owner.PollRequest{Consumer: c, From: owner.FromNext, MaxWait: time.Minute, Key: owner.KeyMatch{Key: []byte("a")}})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		synctest.Wait()
		for _, b := range [][]byte{ownertest.KeyedBatch(t, "b", "1"), ownertest.KeyedBatch(t, "c", "2", "a", "3")} {
			if _, err := o.Produce(ctx, b); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		res := <-done
		if got := fmt.Sprint(keyedRecords(t, res)); got != "[2:a=3]" || res.Next != 3 || res.Token.From != 0 {
			t.Fatalf("long key poll: %s next %d token from %d", got, res.Next, res.Token.From)
		}
		if st := o.KeyPolls(); st.Woken != 1 {
			t.Fatalf("records of other keys woke the poll: %+v", st)
		}
	})
}

// A purge wakes parked key polls, which meet the new history with a fence
// error like any parked poll.//
// covers: G63
func TestPurgeWakesParkedKeyPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
		done := make(chan error, 1)
		go func() {
			_, err := o.Poll(ctx, owner.PollRequest{From: owner.FromEnd, MaxWait: time.Minute, Key: owner.KeyMatch{Key: []byte("a")}})
			done <- err
		}()
		synctest.Wait()
		if _, err := o.Purge(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case err := <-done:
			if !errors.Is(err, fence.ErrStaleHistory) {
				t.Fatalf("parked key poll after a purge: %v, want the stale history", err)
			}
		default:
			t.Fatal("the purge left the key poll parked")
		}
		if st := o.KeyPolls(); st.Parked != 0 {
			t.Fatalf("%d key polls still parked", st.Parked)
		}
	})
}

// An immediate key poll whose first read holds only other keys reads on
// to the high watermark: a device that is behind finds its command at
// once, however many others came before it.
//
// covers: G63
func TestImmediateKeyPollReadsOnPastOtherKeys(t *testing.T) {
	ctx := context.Background()
	m := ownertest.NewMeta()
	o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
	for i := range 50 {
		if _, err := o.Produce(ctx, ownertest.KeyedBatch(t, fmt.Sprint("other-", i), "x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.Produce(ctx, ownertest.KeyedBatch(t, "mine", "go")); err != nil {
		t.Fatal(err)
	}
	res, err := o.Poll(ctx, owner.PollRequest{From: owner.FromFirst, MaxBytes: 1, Key: owner.KeyMatch{Key: []byte("mine")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keyedRecords(t, res)); got != "[50:mine=go]" || res.Next != 51 || res.Token.From != 0 {
		t.Fatalf("immediate key poll: %s next %d token from %d", got, res.Next, res.Token.From)
	}
	res, err = o.Poll(ctx, owner.PollRequest{From: owner.FromFirst, MaxBytes: 1, Key: owner.KeyMatch{Key: []byte("nobody")}})
	if err != nil || len(res.Batches) != 0 || res.Next != 51 {
		t.Fatalf("key poll of no record: %d batches, next %d, %v; want none, next 51", len(res.Batches), res.Next, err)
	}
}

// A key poll over two partitions: another key's record on one partition
// does not answer it, its own key's on the other does, and no poll stays
// in either partition's index once it answered.
//
// covers: G63
func TestPollManyKeyPollWakesForItsKeyOnAnyPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		o0 := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, ownertest.NewLog(m, "t/0"))
		o1, err := owner.NewOwner(owner.OwnerConfig{Topic: ownertest.ScenarioTopic, Partition: 1, Log: ownertest.NewLog(m, "t/1"), Meta: m,
			Producers: o0.ProducerRegistry(), Sessions: o0.SessionRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		key := owner.KeyMatch{Key: []byte("dev-1")}
		polls := []owner.PartitionPoll{
			{Owner: o0, Request: owner.PollRequest{From: owner.FromEnd, Key: key}},
			{Owner: o1, Request: owner.PollRequest{From: owner.FromEnd, Key: key}},
		}
		var out []owner.PartitionResult
		done := make(chan struct{})
		go func() { out = owner.PollMany(ctx, polls, time.Minute); close(done) }()
		synctest.Wait()
		if _, err := o0.Produce(ctx, ownertest.KeyedBatch(t, "dev-2", "x")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case <-done:
			t.Fatalf("another key's record answered the poll: %+v", out)
		default:
		}
		if _, err := o1.Produce(ctx, ownertest.KeyedBatch(t, "dev-1", "y")); err != nil {
			t.Fatal(err)
		}
		<-done
		if out[0].Err != nil || len(out[0].Result.Batches) != 0 {
			t.Fatalf("partition 0: %d batches, %v; want none", len(out[0].Result.Batches), out[0].Err)
		}
		if got := fmt.Sprint(keyedRecords(t, out[1].Result)); out[1].Err != nil || got != "[0:dev-1=y]" {
			t.Fatalf("partition 1: %s, %v", got, out[1].Err)
		}
		for i, o := range []*owner.Owner{o0, o1} {
			if st := o.KeyPolls(); st.Parked != 0 {
				t.Fatalf("partition %d: %d key polls still parked", i, st.Parked)
			}
		}
	})
}

// Where readers see only synced records, a command wakes its device's
// poll once: the poll then waits for the high watermark to reach the
// command, which is the same wake-up, and delivers it once visible.
//
// covers: G63
func TestKeyPollWaitsForItsCommandToBeVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := ownertest.NewMeta()
		l := ownertest.NewLog(m, "t/0")
		o := ownertest.NewOwner(t, ownertest.ScenarioTopic, m, l)
		done := make(chan owner.PollResult, 1)
		go func() {
			res, err := o.Poll(ctx, owner.PollRequest{From: owner.FromEnd, MaxWait: time.Minute, Key: owner.KeyMatch{Key: []byte("dev-1")}})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		synctest.Wait()
		l.HoldAppends()
		for _, kv := range [][2]string{{"dev-2", "a"}, {"dev-1", "b"}} {
			if _, _, err := o.OrderProduce(ctx, ownertest.KeyedBatch(t, kv[0], kv[1])); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		select {
		case res := <-done:
			t.Fatalf("the poll answered before its command was visible: %v", keyedRecords(t, res))
		default:
		}
		l.ShowAppends()
		res := <-done
		if got := fmt.Sprint(keyedRecords(t, res)); got != "[1:dev-1=b]" || res.Next != 2 {
			t.Fatalf("after the sync: %s next %d", got, res.Next)
		}
		if st := o.KeyPolls(); st.Woken != 1 {
			t.Fatalf("%d wake-ups for one command, want 1", st.Woken)
		}
	})
}
