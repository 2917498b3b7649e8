package ops

// TransformStatus is a transform on the status page and in /api/status:
// its partitions' totals, and each partition's progress.
type TransformStatus struct {
	Name   string `json:"name"`
	Plugin string `json:"plugin"`
	From   string `json:"from"`
	To     string `json:"to"`
	// State is running, failing (a partition's last step failed), paused
	// or stopped (Error says why).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Lag, RecordsIn, RecordsOut and PluginFailures are the partitions'
	// totals; the counters count since the transform last started.
	Lag            uint64                     `json:"lag"`
	RecordsIn      uint64                     `json:"records_in"`
	RecordsOut     uint64                     `json:"records_out"`
	PluginFailures uint64                     `json:"plugin_failures"`
	Partitions     []TransformPartitionStatus `json:"partitions"`
}

// TransformPartitionStatus is one input partition of a transform.
type TransformPartitionStatus struct {
	Partition      uint32 `json:"partition"`
	Committed      uint64 `json:"committed"`
	HighWatermark  uint64 `json:"high_watermark"`
	Lag            uint64 `json:"lag"`
	RecordsIn      uint64 `json:"records_in"`
	RecordsOut     uint64 `json:"records_out"`
	PluginFailures uint64 `json:"plugin_failures"`
	LastError      string `json:"last_error,omitempty"`
}

// TransformLister is a Source that runs transforms (the node): the status
// lists them when its Source is one.
type TransformLister interface {
	TransformStatuses() []TransformStatus
}
