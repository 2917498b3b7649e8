package sdk

import "github.com/ledgemq/ledge/transport/wire"

// Errors of consumer groups, for errors.Is. Each is a wire.Status, whose
// RetryClass says what a client does next; a GroupConsumer does it
// itself (it rejoins, or drops the partition and waits for the node to
// assign it again), so an application sees these only from its own
// calls: a Commit or CommitState refused, a Poll whose partitions were
// lost (OnLost is called too). errors.Is also matches them against the
// fence package's sentinels (fence.ErrUnknownMember, ...). ErrNotAssigned
// (a commit the member refused to send) is the client's own.
const (
	// ErrUnknownMember: the group does not know the member: its session
	// expired (no heartbeat within WithSessionTimeout), it left, a process
	// that joined under its member id left, or the node restarted. Class
	// rejoin: every partition is lost; the GroupConsumer rejoins by itself
	// at its next Poll. Do not retry the commit: another member may be
	// reading the partition now.
	ErrUnknownMember = wire.StatusUnknownMember
	// ErrFencedMember: the request names a member epoch that is not this
	// incarnation's (a newer process joined under the member id, or the
	// request was made before a rejoin). Class rejoin, as ErrUnknownMember.
	// The node says it to an earlier incarnation's heartbeats, which the
	// GroupConsumer handles itself; that incarnation's commits are refused
	// by what its successor holds: ErrStaleMemberEpoch or
	// ErrUnassignedPartition while it is in the group, ErrUnknownMember
	// once it has left.
	ErrFencedMember = wire.StatusFencedMember
	// ErrStaleMemberEpoch: the work predates the member's current
	// assignment of the partition (it lost the partition and received it
	// again since the poll, or a process that joined under its member id
	// received it). Class refresh: drop what was held for the partition;
	// the next Poll reads it from the group's committed offset, if the
	// member holds it again.
	ErrStaleMemberEpoch = wire.StatusStaleMemberEpoch
	// ErrUnassignedPartition: the member does not hold the partition.
	// Class give up for this request: the partition belongs to another
	// member now; the GroupConsumer calls OnLost and commits nothing more
	// for it.
	ErrUnassignedPartition = wire.StatusUnassignedPartition
)
