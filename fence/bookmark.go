package fence

// Outcome says how a resolved bookmark is to be used.
type Outcome uint8

const (
	// ResumeAt: the consumer resumes at Resolution.Offset.
	ResumeAt Outcome = iota + 1
	// ResumeByPolicy: the bookmark is still of the current lineage but
	// retention removed what it points at (or it lies past the high
	// watermark); the consumer's reset policy (earliest, latest) decides.
	ResumeByPolicy
)

// Resolution is where a consumer with a bookmark resumes.
type Resolution struct {
	Outcome Outcome
	// Offset is the resume position for ResumeAt, and the bookmark's
	// offset (after the lineage was applied) for ResumeByPolicy.
	Offset uint64
	// Moved: a purge or a lossy recovery since the bookmark moved it.
	Moved bool
	// Truncated: after the move, retention had already removed part of
	// the new history; the consumer resumes at the log start.
	Truncated bool
}

// ResolveBookmark returns where a consumer whose committed position is
// offset in history epoch resumes on partition p, whose lineage is the
// list of transitions that began each of its epochs, in increasing epoch
// order, ending with p's current epoch.
//
// A bookmark of the current epoch stands. Through each later transition:
// a purge (or a re-creation) moves it to the transition's start, never to
// "no committed offset", so a consumer configured for latest does not skip
// what was written after the purge; a lossy recovery keeps it if it is at
// most KeptEnd (everything before it survived) and otherwise moves it to
// the start of the new epoch. A moved position below the log start (because
// retention ran since) becomes the log start; an unmoved one below the log
// start is left to the reset policy, as after any retention.
//
// ErrUnknownHistory: the epoch is not in the lineage, or the lineage does not
// end at p.History.
func ResolveBookmark(p Partition, lineage []HistoryTransition, offset uint64, epoch HistoryEpoch) (Resolution, error) {
	if len(lineage) == 0 || lineage[len(lineage)-1].Epoch != p.History {
		return Resolution{}, reject(CodeUnknownHistory, p, "lineage does not end at history epoch %d", p.History)
	}
	i := len(lineage) - 1
	for i >= 0 && lineage[i].Epoch > epoch {
		i--
	}
	if i < 0 || lineage[i].Epoch != epoch {
		return Resolution{}, reject(CodeUnknownHistory, p, "history epoch %d is not in the partition's lineage", epoch)
	}
	r := Resolution{Outcome: ResumeAt, Offset: offset}
	for _, tr := range lineage[i+1:] {
		switch tr.Kind {
		case TransitionLossyRecovery:
			if r.Offset > tr.KeptEnd {
				r.Offset, r.Moved = tr.Start, true
			}
		default:
			r.Offset, r.Moved = tr.Start, true
		}
	}
	switch {
	case r.Offset < p.LogStart && r.Moved:
		r.Offset, r.Truncated = p.LogStart, true
	case r.Offset < p.LogStart || r.Offset > p.HighWatermark:
		r.Outcome = ResumeByPolicy
	}
	return r, nil
}
