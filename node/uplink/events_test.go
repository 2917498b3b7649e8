package uplink

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/ledgemq/ledge/internal/syncbuf"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/node/uplink/uplinktest"
)

// keep returns w.values[p] restricted to the offset ranges [from, to).
func (w *uplinkWorld) keep(p int, ranges ...[2]int) []string {
	var out []string
	for _, r := range ranges {
		out = append(out, w.values[p][r[0]:r[1]]...)
	}
	return out
}

// TestUplinkPurgeSkipsUnforwardedRecords: records of a purged history that
// were not forwarded yet are gone; the forwarder counts them as dropped,
// says so, and forwards the new history from its start.
//
// covers: G42
func TestUplinkPurgeSkipsUnforwardedRecords(t *testing.T) {
	w := newUplinkWorld(t, 1)
	var logs syncbuf.Buffer
	f := w.forwarder(0, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	w.produce(0, 20)
	w.drain(f, 0, 0)
	w.produce(0, 10) // offsets 20..29, never forwarded
	if _, err := w.logs[0].Purge(); err != nil {
		t.Fatal(err)
	}
	w.produce(0, 5) // offsets 30..34, the new history
	w.drain(f, 0, 0)
	if s := f.Status(); s.Dropped != 10 || s.Forwarded != 25 {
		t.Fatalf("status %+v, want 10 dropped and 25 forwarded", s)
	}
	if !bytes.Contains(logs.Bytes(), []byte("purged")) {
		t.Fatalf("the log does not say the partition was purged: %s", logs.Bytes())
	}
	got, _ := w.readCommitted()
	uplinktest.CheckValues(t, got[0], w.keep(0, [2]int{0, 20}, [2]int{30, 35}))
}

// TestUplinkDropOldestCountsDropped: under drop-oldest, records retention
// deleted before they were forwarded are skipped, counted and logged; the
// forwarder sets no retention floor.
//
// covers: G42
func TestUplinkDropOldestCountsDropped(t *testing.T) {
	w := newUplinkWorld(t, 1)
	var logs syncbuf.Buffer
	f := w.forwarder(0, func(c *Config) {
		c.Overflow = DropOldest
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	w.produce(0, 30)
	w.drain(f, 0, 0)
	w.produce(0, 20)         // 30..49
	w.logs[0].RetainFrom(40) // retention overtakes the uplink
	w.produce(0, 5)          // 50..54
	w.drain(f, 0, 0)
	if s := f.Status(); s.Dropped != 10 {
		t.Fatalf("dropped %d, want 10", s.Dropped)
	}
	if _, ok := f.RetentionFloor(); ok {
		t.Fatal("drop-oldest must not hold retention back")
	}
	if !bytes.Contains(logs.Bytes(), []byte("drop-oldest")) {
		t.Fatalf("the log does not name the policy: %s", logs.Bytes())
	}
	got, _ := w.readCommitted()
	uplinktest.CheckValues(t, got[0], w.keep(0, [2]int{0, 30}, [2]int{40, 55}))
}

// TestUplinkDropCountedOnceAfterAFailedStep: a step that counted the
// records retention deleted unforwarded, then failed before its
// transaction committed, leaves the position in Kafka where it was; the
// forwarder reconnects, reads it back and finds the same records gone:
// they are counted, and logged, once.
func TestUplinkDropCountedOnceAfterAFailedStep(t *testing.T) {
	w := newUplinkWorld(t, 1)
	var logs syncbuf.Buffer
	f := w.forwarder(0, func(c *Config) {
		c.Overflow = DropOldest
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	w.produce(0, 30)
	w.drain(f, 0, 0)
	w.produce(0, 20)         // 30..49
	w.logs[0].RetainFrom(40) // retention overtakes the uplink
	w.produce(0, 5)          // 50..54
	f.cfg.beforeCommit = func() error { return errKilled }
	if _, err := f.Step(context.Background()); !errors.Is(err, errKilled) {
		t.Fatalf("step: %v, want the injected failure", err)
	}
	f.cfg.beforeCommit = nil
	w.drain(f, 0, 0)
	if s := f.Status(); s.Dropped != 10 || s.Forwarded != 45 {
		t.Fatalf("status %+v, want 10 dropped and 45 forwarded", s)
	}
	if n := bytes.Count(logs.Bytes(), []byte("gone before they were forwarded")); n != 1 {
		t.Fatalf("the drop is logged %d times, want once: %s", n, logs.Bytes())
	}
	got, _ := w.readCommitted()
	uplinktest.CheckValues(t, got[0], w.keep(0, [2]int{0, 30}, [2]int{40, 55}))
}

// TestUplinkBlockHoldsRetentionFloor: under block, the retention floor is
// the position not yet forwarded.
func TestUplinkBlockHoldsRetentionFloor(t *testing.T) {
	w := newUplinkWorld(t, 1)
	f := w.forwarder(0, nil)
	w.produce(0, 30)
	w.drain(f, 0, 0)
	w.produce(0, 20)
	if floor, ok := f.RetentionFloor(); !ok || floor != 30 {
		t.Fatalf("floor %d %v, want 30", floor, ok)
	}
}

// TestUplinkRecreatedTopicStartsAfresh: a re-created topic has a new topic
// id, hence a new transactional id and no position: its forwarder starts
// at the new topic's log start, and the old forwarder's id is left alone.
//
// covers: G43
func TestUplinkRecreatedTopicStartsAfresh(t *testing.T) {
	w := newUplinkWorld(t, 1)
	w.produce(0, 10)
	old := w.forwarder(0, nil)
	w.drain(old, 0, 0)
	old.Close()

	w.topic[0] ^= 0xff // the re-created topic: same name, new id, empty log
	m := ownertest.NewMeta()
	w.logs[0] = ownertest.NewLog(m, "p0")
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: w.topic, Log: w.logs[0], Meta: m})
	if err != nil {
		t.Fatal(err)
	}
	w.owners[0] = o
	before := w.values[0]
	w.values[0] = nil
	w.produce(0, 7)
	f := w.forwarder(0, nil)
	if f.TransactionalID() == old.TransactionalID() {
		t.Fatalf("re-created topic reuses transactional id %s", f.TransactionalID())
	}
	w.drain(f, 0, 0)
	if s := f.Status(); s.Forwarded != 7 {
		t.Fatalf("forwarded %d, want the 7 records of the new topic", s.Forwarded)
	}
	got, _ := w.readCommitted()
	uplinktest.CheckValues(t, got[0], append(before, w.values[0]...))
}
