package transform

import (
	"sync"
	"time"
)

// PartitionStatus is a transform's progress on one input partition.
// Counters count since the transform last started on the node (a start
// of the node, a resume).
type PartitionStatus struct {
	Partition uint32
	// Running: the node holds the partition for the transform now.
	Running bool
	// Committed is the input offset processed and committed: the
	// outputs of every record below it are in the output topic, exactly
	// once.
	Committed uint64
	// HighWatermark is the input partition's; Lag the records between
	// Committed and it.
	HighWatermark uint64
	Lag           uint64
	// RecordsIn and RecordsOut count the records the transform consumed
	// and appended (committed steps only).
	RecordsIn, RecordsOut uint64
	// PluginFailures counts the plugin's failed calls (a trap, a
	// deadline, a memory limit, an invalid answer); Errors every failure
	// of the partition's runner, the plugin's included. Each failure
	// leaves the input where it was: the batch is processed again after
	// a backoff. A call that never got one of the plugin host's workers
	// (plugins.workers) before its wait ran out, all of them running
	// other calls, is no failure: it counts in neither, and is made
	// again at once.
	PluginFailures, Errors uint64
	// LastError is the latest failure, as the plugin host or the owner
	// said it (or a call made again because the plugin was busy), and
	// LastErrorAt when it happened; both are cleared by the next
	// committed step.
	LastError   string
	LastErrorAt time.Time
}

// Info is a transform with its partitions' status.
type Info struct {
	Spec Spec
	// Error is why the transform does not run (its topics are gone or
	// were re-created, its group refused it); empty while it runs.
	Error      string
	Partitions []PartitionStatus
}

// partStats is the live status of one input partition, shared by the
// partition's successive runners.
type partStats struct {
	now func() time.Time
	in  Input

	mu sync.Mutex
	st PartitionStatus
}

func (s *partStats) setCommitted(off uint64) {
	s.mu.Lock()
	s.st.Committed = off
	s.mu.Unlock()
}

func (s *partStats) setHigh(hw uint64) {
	s.mu.Lock()
	s.st.HighWatermark = max(s.st.HighWatermark, hw)
	s.mu.Unlock()
}

func (s *partStats) setRunning(on bool) {
	s.mu.Lock()
	s.st.Running = on
	s.mu.Unlock()
}

func (s *partStats) promoted(inputs, outputs int) {
	s.mu.Lock()
	s.st.RecordsIn += uint64(inputs)
	s.st.RecordsOut += uint64(outputs)
	s.st.LastError, s.st.LastErrorAt = "", time.Time{}
	s.mu.Unlock()
}

func (s *partStats) pluginFailed() {
	s.mu.Lock()
	s.st.PluginFailures++
	s.mu.Unlock()
}

// starved notes a call made again because the plugin host was busy:
// the reason shows, and no failure is counted.
func (s *partStats) starved(err error) {
	s.mu.Lock()
	s.st.LastError, s.st.LastErrorAt = err.Error(), s.now()
	s.mu.Unlock()
}

func (s *partStats) fail(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	s.st.Errors++
	s.st.LastError, s.st.LastErrorAt = err.Error(), s.now()
	s.mu.Unlock()
}

// status returns the partition's status, its high watermark and lag read
// from the input partition now.
func (s *partStats) status() PartitionStatus {
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	if s.in != nil {
		st.HighWatermark = s.in.State().HighWatermark
	}
	if st.HighWatermark > st.Committed {
		st.Lag = st.HighWatermark - st.Committed
		if s.in != nil {
			st.Lag -= min(st.Lag, s.in.Skipped(st.Committed, st.HighWatermark))
		}
	}
	return st
}

// State is paused, stopped (Error says why), failing (a partition's last
// step failed) or running.
func (i Info) State() string {
	switch {
	case i.Spec.Paused:
		return "paused"
	case i.Error != "":
		return "stopped"
	}
	for _, p := range i.Partitions {
		if p.LastError != "" {
			return "failing"
		}
	}
	return "running"
}
