package owner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// covers: issue 11 (retention never deletes records that have not been
// forwarded; the choice is visible when it bites)
//
// TestOwnerRetentionFloor: the owner asks its floor at every enforcement;
// retention holds back while the floor is below what it would delete,
// follows the floor as it rises, and runs as configured once there is no
// floor. RetentionHold says what was held back and counts it.
func TestOwnerRetentionFloor(t *testing.T) {
	l := ownertest.NewLog(ownertest.NewMeta(), "p0")
	for i := 0; i < 10; i++ {
		if _, _, err := l.Append(ownertest.Batch(t, "a", "b")); err != nil {
			t.Fatal(err)
		}
	}
	var floor ownertest.Floor
	floor.Move(0, true) // an uplink that has not forwarded anything
	o, err := owner.NewOwner(owner.OwnerConfig{Log: l, Meta: ownertest.NewMeta(), RetentionFloor: floor.Get})
	if err != nil {
		t.Fatal(err)
	}
	l.SetRetentionWant(16) // retention wants 8 of the 10 batches gone
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	res, err := o.EnforceRetention(now)
	if err != nil {
		t.Fatal(err)
	}
	if res.LogStart != 0 || !res.HeldBack() || res.Wanted != 16 || res.Floor != 0 {
		t.Fatalf("floor 0: %+v", res)
	}
	if h := o.RetentionHold(); !h.Held || h.Times != 1 || h.Wanted != 16 || h.HeldBytes == 0 {
		t.Fatalf("hold at floor 0: %+v", h)
	}

	floor.Move(7, true) // forwarded up to offset 6: batches ending below 7 may go
	res, err = o.EnforceRetention(now)
	if err != nil {
		t.Fatal(err)
	}
	if res.LogStart != 6 || !res.HeldBack() {
		t.Fatalf("floor 7: %+v", res)
	}
	if st := o.State(); st.LogStart != 6 {
		t.Fatalf("log start %d at floor 7", st.LogStart)
	}
	if h := o.RetentionHold(); !h.Held || h.Times != 2 || h.Floor != 7 {
		t.Fatalf("hold at floor 7: %+v", h)
	}

	floor.Move(20, true) // everything forwarded
	res, err = o.EnforceRetention(now)
	if err != nil {
		t.Fatal(err)
	}
	if res.LogStart != 16 || res.HeldBack() {
		t.Fatalf("floor 20: %+v", res)
	}
	if h := o.RetentionHold(); h.Held || h.Times != 2 || h.HeldBytes != 0 {
		t.Fatalf("hold after the floor rose: %+v", h)
	}

	// No floor (overflow drop-oldest, or the uplink removed).
	l.SetRetentionWant(20)
	floor.Move(0, false)
	if res, err = o.EnforceRetention(now); err != nil || res.LogStart != 20 || res.HeldBack() || res.Floor != owner.NoRetentionFloor {
		t.Fatalf("no floor: %+v, %v", res, err)
	}
}

// TestOwnerRetentionFloorEngine: the same on the storage engine, through
// the node's adapter: retention by size keeps every segment holding an
// offset at or above the floor, and catches up when the floor rises.
func TestOwnerRetentionFloorEngine(t *testing.T) {
	e, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "data", ReservedBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	top, err := e.CreateTopic("t", engine.TopicConfig{SegmentBytes: 4096, MaxBatchBytes: 1024, RetentionBytes: 8192})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	log := owner.NewEngineLog(p)
	value := strings.Repeat("v", 100)
	for i := 0; i < 100; i++ {
		_, last, err := log.Append(ownertest.Batch(t, value, value))
		if err != nil {
			t.Fatal(err)
		}
		if err := log.WaitDurable(context.Background(), last); err != nil {
			t.Fatal(err)
		}
	}
	hw := log.State().HighWatermark
	var floor ownertest.Floor
	floor.Move(0, true)
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: top.ID(), Log: log, Meta: ownertest.NewMeta(), RetentionFloor: floor.Get})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	res, err := o.EnforceRetention(now)
	if err != nil {
		t.Fatal(err)
	}
	if res.LogStart != 0 || !res.HeldBack() || res.HeldBytes == 0 {
		t.Fatalf("floor 0: %+v", res)
	}
	wanted := res.Wanted

	floor.Move(wanted/2, true)
	if res, err = o.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	if res.LogStart == 0 || res.LogStart > wanted/2 || res.Wanted != wanted || !res.HeldBack() {
		t.Fatalf("floor %d: %+v (retention alone: %d)", wanted/2, res, wanted)
	}

	floor.Move(hw, true)
	if res, err = o.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	if res.LogStart != wanted || res.HeldBack() {
		t.Fatalf("floor at the high watermark: %+v, want start %d", res, wanted)
	}
	if h := o.RetentionHold(); h.Held || h.Times != 2 {
		t.Fatalf("hold: %+v", h)
	}
}
