package node

import (
	"fmt"
	"time"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/downlink"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/transport/wire"
)

// Storage is where a Node keeps its topics, their partition logs and its
// metadata: the storage engine under the data directory in production
// (Config.Storage nil), an in-memory model in tests and simulations.
type Storage interface {
	// Metadata is the node's ordered key-value store (tokens, producer
	// registry, consumer sessions, owner snapshots).
	Metadata() owner.Metadata
	// Topics returns every topic, with its partition logs.
	Topics() ([]StoredTopic, error)
	// CreateTopic creates a topic with a new, random id. A zero field of
	// cfg takes the storage's default, except the retention limits (zero
	// keeps forever); the returned topic carries the effective values.
	// A name in use fails with an error matching ErrTopicExists.
	CreateTopic(name string, cfg wire.TopicConfig) (StoredTopic, error)
	// DeleteTopic deletes the topic with that name and id: its logs,
	// bookmarks and producer state.
	DeleteTopic(name string, id fence.TopicID) error
	// Close shuts the storage down cleanly.
	Close() error
}

// StoredTopic is a topic as storage holds it.
type StoredTopic struct {
	Name   string
	ID     fence.TopicID
	Config wire.TopicConfig
	// Partitions are the topic's logs, by index.
	Partitions []owner.PartitionLog
}

// spaceReporter is a Storage that knows whether its disk is full: the
// storage engine.
type spaceReporter interface {
	Space() engine.SpaceStatus
}

// Space is the engine's no-space state and reserve.
func (s *engineStorage) Space() engine.SpaceStatus { return s.e.Space() }

// DiskSpace returns what storage says of its disk (ok false: it says
// nothing, as an in-memory model does), for the HTTP endpoints
// (ops.Source).
func (n *Node) DiskSpace() (engine.SpaceStatus, bool) {
	r, ok := n.storage.(spaceReporter)
	if !ok {
		return engine.SpaceStatus{}, false
	}
	return r.Space(), true
}

// diskCheck is /readyz's word on the disk. A full disk leaves the node
// ready (reads, commits, purge, retention and deletion go on; appends are
// refused with the retryable not-enough-space status and resume by
// themselves once space is freed); the detail says so.
func (n *Node) diskCheck() (ops.Check, bool) {
	sp, ok := n.DiskSpace()
	if !ok {
		return ops.Check{}, false
	}
	c := ops.Check{Name: "disk", OK: true, Detail: "room for appends"}
	if sp.Full {
		c.Detail = fmt.Sprintf("full since %s: appends refused (retryable) until space is freed; reads, commits, purge and retention go on",
			sp.Since.UTC().Format(time.RFC3339))
	}
	return c, true
}

// Uplinks returns the node's uplink manager, for the HTTP endpoints
// (ops.Source).
func (n *Node) Uplinks() *uplink.Manager { return n.uplinks }

// Downlinks returns the node's downlink manager, for the HTTP endpoints
// (ops.Source).
func (n *Node) Downlinks() *downlink.Manager { return n.downlinks }
