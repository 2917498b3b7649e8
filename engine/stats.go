package engine

import (
	"sync/atomic"
	"time"
)

// PartitionStats are a partition's counters since the engine opened, for
// metrics.
type PartitionStats struct {
	Appends       uint64        // batches appended
	AppendedBytes uint64        // bytes of those batches
	Writes        uint64        // coalesced file writes
	Syncs         uint64        // fsyncs of segment files
	SyncTime      time.Duration // total time in those fsyncs
	SyncFailures  uint64
	NoSpace       uint64 // appends refused on a full disk
	// RetentionHeld counts EnforceRetention calls whose floor kept data
	// that retention would have deleted.
	RetentionHeld uint64
	// SkippedOffsets is not a counter: it is how many offsets between the
	// log start and the high watermark recoveries skipped (they hold no
	// record), so that records are HighWatermark - LogStart - SkippedOffsets.
	SkippedOffsets uint64
}

type partStats struct {
	appends, appendedBytes, writes, syncs, syncNanos, syncFailures, noSpace, retentionHeld atomic.Uint64
}

// Stats returns the partition's counters.
func (p *Partition) Stats() PartitionStats {
	s := &p.stats
	return PartitionStats{
		Appends:       s.appends.Load(),
		AppendedBytes: s.appendedBytes.Load(),
		Writes:        s.writes.Load(),
		Syncs:         s.syncs.Load(),
		SyncTime:      time.Duration(s.syncNanos.Load()),
		SyncFailures:  s.syncFailures.Load(),
		NoSpace:       s.noSpace.Load(),
		RetentionHeld: s.retentionHeld.Load(),

		SkippedOffsets: p.skippedAboveStart(),
	}
}

// skippedAboveStart counts the skipped offsets between the start and the
// high watermark.
func (p *Partition) skippedAboveStart() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return skippedIn(p.gaps, p.start, p.hwLocked())
}
