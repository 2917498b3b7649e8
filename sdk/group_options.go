package sdk

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ledgemq/ledge/transport/wire"
)

// Delivery says what a GroupConsumer guarantees about the records it
// returns when members come and go, crash or are fenced.
type Delivery uint8

// Delivery modes.
const (
	// AtLeastOnce (the default for a group without a commit policy;
	// see WithDelivery): the records a Poll returns are committed
	// by the next Poll — the application finished them when it polled
	// again — or when their partition is revoked, or by Close, or by
	// Commit. A member that crashes or is fenced before that leaves them
	// uncommitted, and whoever holds the partition next processes them
	// again. Nothing is skipped.
	AtLeastOnce Delivery = iota
	// AtMostOnce: the node commits what a poll returns before the reply
	// leaves it (commit on delivery). A member that crashes before it
	// processed them loses them; no record is processed twice. A poll
	// whose member was fenced while it ran returns nothing and commits
	// nothing.
	AtMostOnce
	// CommitByPolicy (the default for a group with a commit policy; see
	// WithDelivery): the consumer commits nothing by itself — not at the
	// next Poll, not on revocation, not on Close. The group's commit
	// policy (ledge group set-policy, Client.SetGroupCommitPolicy) decides
	// the committed offset on the node: its proposal for each poll is
	// applied by the partition's owner under that poll's token, so a
	// fenced member's proposal changes nothing. Commit with records still
	// works; CommitState is refused (the policy would move the offset
	// apart from the state). Without a policy on the group nothing is committed
	// unless the application calls Commit. What is delivered but not yet
	// committed by the policy is processed again by the next holder of
	// the partition, as with AtLeastOnce.
	CommitByPolicy
)

// String returns the mode's name.
func (d Delivery) String() string {
	switch d {
	case AtMostOnce:
		return "at-most-once"
	case CommitByPolicy:
		return "commit-by-policy"
	}
	return "at-least-once"
}

// Assignor names how the node shares a group's partitions out. Both
// assignors are sticky: a rebalance moves as few partitions as balance
// allows.
type Assignor = wire.GroupAssignor

// Assignors.
const (
	// AssignRange gives each member contiguous ranges of each topic.
	AssignRange = wire.AssignorRange
	// AssignRoundRobin deals all the group's partitions out in turn.
	AssignRoundRobin = wire.AssignorRoundRobin
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// PartitionsFunc is a rebalance callback. It runs inside Poll (or Close),
// on the goroutine that called it, with the partitions concerned.
type PartitionsFunc func(ctx context.Context, partitions []TopicPartition)

// GroupOption configures a GroupConsumer (see Client.NewGroupConsumer).
type GroupOption interface{ applyGroup(*groupConfig) }

type groupOption func(*groupConfig)

func (f groupOption) applyGroup(c *groupConfig) { f(c) }

type groupConfig struct {
	key              wire.PollKey // WithKey, WithKeyPrefix
	delivery         Delivery
	deliverySet      bool   // WithDelivery was given
	policy           string // the group's policy the consumer follows, or ""
	assignor         Assignor
	memberID         string
	clientID         string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	reset            ResetPolicy
	maxWait          time.Duration
	maxBytes         int
	maxMessages      int
	onAssigned       PartitionsFunc
	onRevoked        PartitionsFunc
	onLost           PartitionsFunc
}

func defaultGroupConfig() groupConfig {
	return groupConfig{
		maxWait: DefaultMaxWait, maxBytes: DefaultMaxPollBytes, maxMessages: DefaultMaxMessages,
		clientID: defaultClientID(),
	}
}

// defaultClientID is the program's name and process id, such as
// "ingest-4242", cut to a name's 255 bytes.
func defaultClientID() string {
	name := "ledge-go"
	if len(os.Args) > 0 && os.Args[0] != "" {
		name = filepath.Base(os.Args[0])
	}
	suffix := "-" + strconv.Itoa(os.Getpid())
	return strings.ToValidUTF8(name[:min(len(name), wire.MaxNameLen-len(suffix))], "") + suffix
}

// WithGroupClientID names the member's program for operators: `ledge
// group describe` and the node's status page show it next to the member's
// id and the IP address it connects from. The node does not interpret it,
// and members may share one. At most 255 bytes; "" sends none.
//
// Default: the program's name and process id, such as "ingest-4242". The
// host is shown beside it already, so the name says which program and
// the pid which of its processes on that host — what an operator looks
// for when a member is stuck or holds too much.
func WithGroupClientID(id string) GroupOption {
	return groupOption(func(c *groupConfig) { c.clientID = id })
}

// WithDelivery sets the delivery mode, whatever the group's commit
// policy.
//
// Default: the group's. When the group has a commit policy (ledge group
// set-policy, Client.SetGroupCommitPolicy) as the consumer is created,
// CommitByPolicy, so that the policy governs the group's commits;
// otherwise AtLeastOnce. A policy set or cleared later does not change
// the mode of a running consumer. Creating the consumer asks the node
// for the group's policy once (DescribeGroup). WithDelivery(AtLeastOnce)
// is the explicit opt-out: the consumer commits what it polled, and the
// policy's proposals can then only move the offset further.
func WithDelivery(d Delivery) GroupOption {
	return groupOption(func(c *groupConfig) { c.delivery, c.deliverySet = d, true })
}

// WithAssignor asks for the group's assignor. The first member of a group
// chooses it; later members' choices are ignored while the group has
// members.
//
// Default: the node's (range).
func WithAssignor(a Assignor) GroupOption {
	return groupOption(func(c *groupConfig) { c.assignor = a })
}

// WithMemberID sets the member's id (at most 255 bytes). A process that
// rejoins under the same id replaces its earlier incarnation at once.
//
// Default: the node picks one at the first join, and the consumer keeps it
// across rejoins.
func WithMemberID(id string) GroupOption {
	return groupOption(func(c *groupConfig) { c.memberID = id })
}

// WithSessionTimeout sets how long the node keeps a member that stopped
// heartbeating; its partitions then move.
//
// Default: the node's (10 s). The node bounds it to [1 s, 5 min], and
// has the member heartbeat every second or every third of its session,
// whichever is shorter.
func WithSessionTimeout(d time.Duration) GroupOption {
	return groupOption(func(c *groupConfig) { c.sessionTimeout = max(d, 0) })
}

// WithRebalanceTimeout sets how long the member may take to give up a
// revoked partition — the time between two Polls, since revocations are
// carried out inside Poll. A member slower than that is removed from the
// group and loses all its partitions.
//
// Default: the node's (30 s).
func WithRebalanceTimeout(d time.Duration) GroupOption {
	return groupOption(func(c *groupConfig) { c.rebalanceTimeout = max(d, 0) })
}

// WithGroupResetPolicy sets where a partition is read from when the group
// has no committed offset on it, or the committed offset is outside the
// partition (retention removed the records).
//
// Default ResetEarliest.
func WithGroupResetPolicy(r ResetPolicy) GroupOption {
	return groupOption(func(c *groupConfig) { c.reset = r })
}

// WithGroupMaxWait sets how long a poll waits for records when none are
// there, and how long Poll waits for an assignment when the member holds
// no partition.
//
// Default 1 s. Zero or negative answers at once.
func WithGroupMaxWait(d time.Duration) GroupOption {
	return groupOption(func(c *groupConfig) { c.maxWait = max(d, 0) })
}

// WithGroupMaxBytes bounds the bytes of one poll (at least one whole
// batch per partition is returned).
//
// Default 4 MiB. Values below 1 keep the default.
func WithGroupMaxBytes(n int) GroupOption {
	return groupOption(func(c *groupConfig) {
		if n > 0 {
			c.maxBytes = n
		}
	})
}

// OnAssigned is called with the partitions the member received, before
// Poll reads them. They are read from the group's committed offsets.
//
// Default: none.
func OnAssigned(f PartitionsFunc) GroupOption {
	return groupOption(func(c *groupConfig) { c.onAssigned = f })
}

// OnRevoked is called with partitions the member gives up in an orderly
// rebalance (and with every partition at Close). Under AtLeastOnce, what
// earlier Polls returned from them is committed just before; the callback
// may still Commit records of its own. After it returns the member stops
// reading them and tells the node, which hands them to another member.
//
// Default: none.
func OnRevoked(f PartitionsFunc) GroupOption {
	return groupOption(func(c *groupConfig) { c.onRevoked = f })
}

// OnLost is called with partitions the member lost without giving them up:
// the node fenced it (its session expired, it was too slow to give up a
// revoked partition, a restart of the node) or refused its work on a
// partition as fenced. Another member may already be reading them: the
// member commits nothing more for them, and what was pending is dropped.
// A fenced member then rejoins by itself.
//
// Default: none.
func OnLost(f PartitionsFunc) GroupOption {
	return groupOption(func(c *groupConfig) { c.onLost = f })
}
