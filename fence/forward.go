package fence

// ForwardStep is what one transition of a partition's lineage did to a
// forwarder's position (an uplink's: the next offset to send on).
type ForwardStep struct {
	Kind TransitionKind
	// Dropped, for a purge: the records [From, To) were purged before they
	// were forwarded. Empty when the position was past the purge.
	Dropped Range
	// ForwardedLost, for a lossy recovery: the offsets [From, To) were
	// forwarded, then lost from the partition; what was sent stays sent.
	ForwardedLost Range
	// UnforwardedLost, for a lossy recovery: the offsets [From, To) were
	// lost before they were forwarded, and never will be.
	UnforwardedLost Range
}

// Range is the offsets [From, To); empty when To <= From.
type Range struct{ From, To uint64 }

// Empty reports whether r holds no offset.
func (r Range) Empty() bool { return r.To <= r.From }

// ResolveForwardPosition carries pos, a forwarder's position committed in
// history epoch, into the partition's current history through the
// transitions of lineage after that epoch (lineage in increasing epoch
// order, as PartitionLog.Lineage gives it). It differs from
// ResolveBookmark, whose consumer must see every record of a new history:
// a forwarder has already sent what it sent, and offsets are never reused,
// so its position only ever moves forward —
//
//   - a purge moves a position below its start to the start (the records
//     in between were purged before they were forwarded);
//   - a lossy recovery moves a position past what survived to where
//     numbering resumed, and leaves one at or below it.
//
// It returns the resolved position and the steps taken, for the caller to
// count and log. known is false when epoch is not in lineage (a restored
// backup older than the position): the position is returned unchanged.
func ResolveForwardPosition(lineage []HistoryTransition, pos uint64, epoch HistoryEpoch) (resolved uint64, steps []ForwardStep, known bool) {
	for _, tr := range lineage {
		if tr.Epoch == epoch {
			known = true
		}
	}
	if !known {
		return pos, nil, false
	}
	for _, tr := range lineage {
		if tr.Epoch <= epoch {
			continue
		}
		switch tr.Kind {
		case TransitionPurge:
			if pos >= tr.Start {
				continue
			}
			steps = append(steps, ForwardStep{Kind: tr.Kind, Dropped: Range{pos, tr.Start}})
			pos = tr.Start
		case TransitionLossyRecovery:
			s := ForwardStep{Kind: tr.Kind}
			from := tr.KeptEnd
			if pos > tr.KeptEnd {
				s.ForwardedLost = Range{tr.KeptEnd, pos}
				from = pos
				pos = max(pos, tr.Start)
			}
			s.UnforwardedLost = Range{from, tr.Start}
			steps = append(steps, s)
		}
	}
	return pos, steps, true
}
