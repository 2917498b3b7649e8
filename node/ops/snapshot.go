package ops

import (
	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/downlink"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// Snapshot is a node's state at one moment, as the status and the
// scrape-time collectors read it. It is read-only: taking one changes no
// log and no consumer's progress, and takes no owner's lock.
type Snapshot struct {
	Listen    string
	DataDir   string
	Topics    []TopicSnapshot
	Transport quic.Stats
	Parked    int
	MaxParked int
	DiskFree  uint64
	DiskTotal uint64
}

// TopicSnapshot is a topic in a Snapshot.
type TopicSnapshot struct {
	Name   string
	ID     fence.TopicID
	Config wire.TopicConfig
	Parts  []PartitionSnapshot
}

// PartitionSnapshot is a partition in a Snapshot.
type PartitionSnapshot struct {
	Index     uint32
	State     owner.LogState
	Size      int64 // -1: unknown
	Stats     engine.PartitionStats
	HasStats  bool // the storage keeps stats (the engine does)
	KeyPolls  owner.KeyPollStats
	Consumers []ConsumerSnapshot
}

// ConsumerSnapshot is one bookmark on a partition, resolved in the
// partition's current history.
type ConsumerSnapshot struct {
	Name      string
	Kind      string // "consumer" or "group"
	Committed owner.Bookmark
	Position  uint64
	Lag       uint64
}

// Depth says how much a snapshot reads.
type Depth uint8

const (
	// OffsetsOnly reads the partitions' states and counters: what the
	// throughput sampler needs.
	OffsetsOnly Depth = iota
	// Everything also reads sizes on disk, disk usage and every bookmark
	// (a metadata scan per partition).
	Everything
)

// Source is what the HTTP endpoints read of a node; *node.Node is one.
type Source interface {
	// Snapshot reads the node's state to the given depth.
	Snapshot(depth Depth) Snapshot
	// DiskSpace is what the storage says of its disk (ok false: nothing).
	DiskSpace() (sp engine.SpaceStatus, ok bool)
	// ReadinessChecks are the checks /readyz runs beyond the storage's
	// recovery.
	ReadinessChecks() []Check
	// Uplinks is the node's uplink manager (nil: none).
	Uplinks() *uplink.Manager
	// Downlinks is the node's downlink manager (nil: none).
	Downlinks() *downlink.Manager
}
