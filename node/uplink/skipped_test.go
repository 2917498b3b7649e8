package uplink

import (
	"context"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
)

// gapSource is a partition whose offsets [gapFrom, gapTo) a recovery
// skipped.
type gapSource struct {
	hw, gapFrom, gapTo uint64
}

func (g gapSource) Poll(context.Context, owner.PollRequest) (owner.PollResult, error) {
	return owner.PollResult{}, nil
}
func (g gapSource) State() owner.PartitionState        { return owner.PartitionState{HighWatermark: g.hw} }
func (g gapSource) Lineage() []fence.HistoryTransition { return nil }
func (g gapSource) Skipped(from, to uint64) uint64 {
	if lo, hi := max(from, g.gapFrom), min(to, g.gapTo); lo < hi {
		return hi - lo
	}
	return 0
}

// TestUplinkLagLeavesOutSkippedOffsets: the offsets a recovery skipped
// hold no record, so the records not yet forwarded leave them out.
func TestUplinkLagLeavesOutSkippedOffsets(t *testing.T) {
	u := uplinkStats{source: gapSource{hw: 2000, gapFrom: 100, gapTo: 1124}, nowFunc: time.Now}
	u.update(func(s *Status) { s.Position, s.Known = 50, true })
	if got, want := u.snapshot().LagRecords, uint64(2000-50-1024); got != want {
		t.Fatalf("lag %d records, want %d (the 1024 skipped offsets left out)", got, want)
	}
	u.update(func(s *Status) { s.Position = 1500 })
	if got := u.snapshot().LagRecords; got != 500 {
		t.Fatalf("lag past the gap: %d records, want 500", got)
	}
}
