package engine

import (
	"cmp"
	"slices"
	"time"
)

// Gaps: the offsets a recovery skipped. Under interval and none, a
// recovery after an unclean stop resumes numbering at the reservation
// ceiling (offsets below it may have been handed out and seen), so the
// offsets between the recovered end and the ceiling hold no record. The
// partition state records each such range, so that what counts records
// between two offsets (a consumer's lag) does not count them.

// maxGaps bounds the gaps a partition records; the oldest are dropped
// first (a consumer still below them sees its lag overcounted by them).
const maxGaps = 64

// OffsetRange is the offsets [From, To).
type OffsetRange struct{ From, To uint64 }

// Skipped returns how many offsets in [from, to) a recovery skipped: they
// hold no record. Records between two offsets of the log (a consumer's
// lag) are to - from - Skipped(from, to), less whatever retention or a
// purge removed below the start.
func (s PartitionState) Skipped(from, to uint64) uint64 {
	return skippedIn(s.Gaps, from, to)
}

func skippedIn(gaps []OffsetRange, from, to uint64) uint64 {
	var n uint64
	for _, g := range gaps {
		if lo, hi := max(g.From, from), min(g.To, to); lo < hi {
			n += hi - lo
		}
	}
	return n
}

// withGap returns gaps (never modified: it is shared with State's callers)
// with [from, to) added and merged with the gaps it overlaps or touches
// (a recovery that found nothing appended since the previous one skips
// from the same end again), those wholly below start dropped, and at most
// maxGaps kept.
func withGap(gaps []OffsetRange, from, to, start uint64) []OffsetRange {
	all := slices.Clone(gaps)
	if from < to {
		all = append(all, OffsetRange{From: from, To: to})
	}
	slices.SortFunc(all, func(a, b OffsetRange) int { return cmp.Compare(a.From, b.From) })
	out := make([]OffsetRange, 0, len(all))
	for _, g := range all {
		if g.To <= start || g.From >= g.To {
			continue
		}
		g.From = max(g.From, start)
		if n := len(out); n > 0 && g.From <= out[n-1].To {
			out[n-1].To = max(out[n-1].To, g.To)
			continue
		}
		out = append(out, g)
	}
	if len(out) > maxGaps {
		out = out[len(out)-maxGaps:]
	}
	return out
}

// reservation sizes a partition's offset reservations from its append
// rate (Options.ReservationTime of appends, within MinReservationStep and
// ReservationStep). Guarded by the partition's mu.
type reservation struct {
	step uint64    // the last raise's size; 0 before the first
	at   time.Time // when it was made
	from uint64    // the next offset then
}

// stepLocked returns the size of the last raise (the smallest before the
// first): a raise is due once less than half of it is left.
func (r *reservation) stepLocked(o Options) uint64 {
	if r.step == 0 {
		return o.MinReservationStep
	}
	return r.step
}

// next returns the size of the raise made now, with next the next offset
// to hand out; ranOut says an appender waits for it (the rate outgrew the
// last raise: this one is at least twice as large).
func (r *reservation) next(o Options, now time.Time, next uint64, ranOut bool) uint64 {
	step := o.MinReservationStep
	if r.step != 0 {
		// The rate since the last raise, over at least a millisecond (a
		// clock that went back, or did not move, counts as one).
		elapsed := max(now.Sub(r.at), time.Millisecond)
		f := float64(next-r.from) * float64(o.ReservationTime) / float64(elapsed)
		step = o.ReservationStep
		if f < float64(o.ReservationStep) {
			step = uint64(f)
		}
	}
	if ranOut {
		step = max(step, 2*r.step)
	}
	step = min(max(step, o.MinReservationStep), o.ReservationStep)
	r.step, r.at, r.from = step, now, next
	return step
}

// Skipped returns how many offsets in [from, to) a recovery skipped, as
// PartitionState.Skipped does, without copying the partition's state.
func (p *Partition) Skipped(from, to uint64) uint64 {
	p.mu.Lock()
	gaps := p.gaps
	p.mu.Unlock()
	return skippedIn(gaps, from, to)
}
