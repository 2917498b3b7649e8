package ops

import "time"

// Status is what the status page shows and GET /api/status returns, for
// scripts and for `ledge status`. Field names are a contract: add fields,
// never rename one.
type Status struct {
	Time      time.Time        `json:"time"`
	Node      NodeInfo         `json:"node"`
	Health    Health           `json:"health"`
	Transport TransportStatus  `json:"transport"`
	Topics    []TopicStatus    `json:"topics"`
	Consumers []ConsumerStatus `json:"consumers"`
	Plugins   []PluginStatus   `json:"plugins"`
	// Uplinks are the topics forwarded to Kafka, with their lag.
	Uplinks []UplinkTopicStatus `json:"uplinks"`
	// Downlinks are the local topics fed from Kafka, with their lag.
	Downlinks []DownlinkStatus `json:"downlinks"`
	// Transforms are the node's transforms, with their lag.
	Transforms []TransformStatus `json:"transforms"`
}

// NodeInfo describes the process.
type NodeInfo struct {
	Version       string    `json:"version"`
	GoVersion     string    `json:"go_version"`
	Platform      string    `json:"platform"`
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	Listen        string    `json:"listen,omitempty"` // QUIC, once the node is open
	HTTP          string    `json:"http"`
	DataDir       string    `json:"data_dir,omitempty"`
	// HeapBytes is the Go heap in use; see the process_resident_memory_bytes
	// metric for the resident set.
	HeapBytes  uint64 `json:"heap_bytes"`
	Goroutines int    `json:"goroutines"`
	// DiskFreeBytes and DiskTotalBytes describe the file system of the data
	// directory (0 when unknown).
	DiskFreeBytes  uint64 `json:"disk_free_bytes"`
	DiskTotalBytes uint64 `json:"disk_total_bytes"`
}

// Health is the node's liveness and readiness, as /healthz and /readyz
// answer them.
type Health struct {
	Live  bool `json:"live"`
	Ready bool `json:"ready"`
	// Reason says why the node is not ready ("" when it is).
	Reason string  `json:"reason,omitempty"`
	Checks []Check `json:"checks"`
}

// Check is one readiness condition.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// TransportStatus is the QUIC listener's state.
type TransportStatus struct {
	ConnectionsOpen     int64  `json:"connections_open"`
	ConnectionsAccepted uint64 `json:"connections_accepted"`
	ConnectionsRefused  uint64 `json:"connections_refused"`
	AuthFailures        uint64 `json:"auth_failures"`
	StreamsOpen         int64  `json:"streams_open"`
	RequestsInFlight    int64  `json:"requests_in_flight"`
	InflightBytes       int64  `json:"inflight_bytes"`
	InflightBudgetBytes int64  `json:"inflight_budget_bytes"`
	BackpressureWaits   uint64 `json:"backpressure_waits"`
	ParkedPolls         int    `json:"parked_polls"`
	MaxParkedPolls      int    `json:"max_parked_polls"`
}

// TopicStatus is one topic and its partitions.
type TopicStatus struct {
	Name                string            `json:"name"`
	ID                  string            `json:"id"`
	Durability          string            `json:"durability"`
	Compression         string            `json:"compression"`
	Timestamps          string            `json:"timestamps"`
	RetentionAgeSeconds float64           `json:"retention_age_seconds"` // 0: kept forever
	RetentionBytes      uint64            `json:"retention_bytes"`       // per partition; 0: unlimited
	Partitions          []PartitionStatus `json:"partitions"`
	// Totals over the partitions.
	SizeBytes        int64   `json:"size_bytes"` // -1 when unknown
	Records          uint64  `json:"records"`
	RecordsPerSecond float64 `json:"records_per_second"`
	BytesPerSecond   float64 `json:"bytes_per_second"`
}

// PartitionStatus is one partition's offsets, history and traffic.
type PartitionStatus struct {
	Partition     uint32 `json:"partition"`
	LogStart      uint64 `json:"log_start"`
	HighWatermark uint64 `json:"high_watermark"`
	HistoryEpoch  uint64 `json:"history_epoch"`
	// Records is what readers may see: high watermark minus log start,
	// less SkippedOffsets.
	Records uint64 `json:"records"`
	// SkippedOffsets are the offsets between LogStart and HighWatermark
	// that recoveries skipped after unclean stops (interval and none
	// topics): they hold no record and count in neither Records nor lag.
	SkippedOffsets uint64 `json:"skipped_offsets,omitempty"`
	// SizeBytes is the size of the partition's files on disk (-1 when the
	// storage does not say).
	SizeBytes int64 `json:"size_bytes"`
	// Counters since the node started: record batches and their bytes
	// appended, bytes returned by polls.
	Appends        uint64 `json:"appends"`
	AppendedBytes  uint64 `json:"appended_bytes"`
	DeliveredBytes uint64 `json:"delivered_bytes"`
	// Rates over the last few seconds (0 until two samples exist).
	RecordsPerSecond float64 `json:"records_per_second"`
	BytesPerSecond   float64 `json:"bytes_per_second"`
	// Failed says why the partition refuses appends ("" when it does not).
	Failed string `json:"failed,omitempty"`
}

// ConsumerStatus is a named consumer's or a group's progress on a topic.
type ConsumerStatus struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"` // "consumer" or "group"
	Topic string `json:"topic"`
	// Lag is the records between the committed positions and the high
	// watermarks, over the partitions.
	Lag        uint64              `json:"lag"`
	Partitions []ConsumerPartition `json:"partitions"`
	// State, Epoch and Members describe a group (empty for a named
	// consumer): its state (stable, reconciling, empty), group epoch and
	// members with their assignments.
	State   string         `json:"state,omitempty"`
	Epoch   uint64         `json:"epoch,omitempty"`
	Members []MemberStatus `json:"members,omitempty"`
}

// ConsumerPartition is a consumer's progress on one partition.
type ConsumerPartition struct {
	Partition uint32 `json:"partition"`
	// Committed is the stored committed offset and the history epoch it
	// was committed in.
	Committed        uint64 `json:"committed"`
	CommittedHistory uint64 `json:"committed_history"`
	// Position is where the consumer resumes now: the committed offset
	// carried through purges and lossy recoveries, raised to the log start.
	Position uint64 `json:"position"`
	Lag      uint64 `json:"lag"`
	// Member holds the partition (groups).
	Member string `json:"member,omitempty"`
}

// MemberStatus is one member of a group.
type MemberStatus struct {
	ID          string   `json:"id"`
	ClientID    string   `json:"client_id,omitempty"` // as the member joined with it
	Host        string   `json:"host,omitempty"`      // the IP address it connects from
	Epoch       uint64   `json:"epoch"`
	Assignments []string `json:"assignments"` // "topic/partition"
}

// PluginStatus is one plugin's health.
type PluginStatus struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "filter" or "commit-policy"
	// Counters since the node started: calls that reached the plugin,
	// calls that failed, and the failures cut off at their deadline and
	// trapped.
	Calls    uint64 `json:"calls"`
	Failures uint64 `json:"failures"`
	Timeouts uint64 `json:"timeouts"`
	Traps    uint64 `json:"traps"`
	// Strikes are the failures held against the plugin; at the limit it
	// is quarantined.
	Strikes uint64 `json:"strikes"`
	State   string `json:"state"` // "ok", "quarantined", "loading" or "not loaded"
}
