package fence

import (
	"slices"
	"testing"
)

func TestResolveForwardPosition(t *testing.T) {
	lineage := []HistoryTransition{
		{Epoch: 1, Kind: TransitionCreate},
		{Epoch: 2, Kind: TransitionPurge, Start: 100},
		{Epoch: 3, Kind: TransitionLossyRecovery, KeptEnd: 150, Start: 200},
	}
	cases := []struct {
		name  string
		pos   uint64
		epoch HistoryEpoch
		want  uint64
		steps []ForwardStep
		known bool
	}{
		{"current epoch: stands", 170, 3, 170, nil, true},
		{"below a purge: moved to its start, the gap dropped", 40, 1, 100, []ForwardStep{
			{Kind: TransitionPurge, Dropped: Range{40, 100}},
			{Kind: TransitionLossyRecovery, UnforwardedLost: Range{150, 200}},
		}, true},
		{"past a purge: stands; the recovery's lost offsets were not forwarded", 120, 1, 120, []ForwardStep{
			{Kind: TransitionLossyRecovery, UnforwardedLost: Range{150, 200}},
		}, true},
		{"forwarded into what a recovery lost: moved to where numbering resumed", 170, 2, 200, []ForwardStep{
			{Kind: TransitionLossyRecovery, ForwardedLost: Range{150, 170}, UnforwardedLost: Range{170, 200}},
		}, true},
		{"forwarded past the resumed numbering: stands", 210, 2, 210, []ForwardStep{
			{Kind: TransitionLossyRecovery, ForwardedLost: Range{150, 210}, UnforwardedLost: Range{210, 200}},
		}, true},
		{"an epoch the lineage does not know: unchanged", 70, 9, 70, nil, false},
	}
	for _, c := range cases {
		got, steps, known := ResolveForwardPosition(lineage, c.pos, c.epoch)
		if got != c.want || known != c.known || !slices.Equal(steps, c.steps) {
			t.Errorf("%s: got %d %+v %v, want %d %+v %v", c.name, got, steps, known, c.want, c.steps, c.known)
		}
	}
	if !(Range{210, 200}).Empty() || (Range{1, 2}).Empty() {
		t.Error("Range.Empty")
	}
}
