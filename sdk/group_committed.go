package sdk

import (
	"context"
	"fmt"
	"slices"

	"github.com/ledgemq/ledge/transport/wire"
)

// GroupCommitted is the group's committed position on a partition the
// member holds.
type GroupCommitted struct {
	TopicPartition
	// Offset is where the group resumes (one past the last record
	// committed); valid when Committed is true.
	Offset    uint64
	Committed bool
	// History is the history epoch the offset was committed in.
	History uint64
	// Err is why the node could not answer for the partition, or nil.
	Err error
}

// Committed returns the group's committed positions on the partitions the
// member holds (Assignment), in topic and partition order: where the
// group resumes each of them if it moves to another member. It asks the
// node under the member's current epoch, so it includes every commit the
// node accepted, the automatic ones of AtMostOnce and a commit policy's
// too. A partition the node no longer counts as the member's has its
// refusal in Err: ErrUnassignedPartition or ErrStaleMemberEpoch when it
// moved (to another member, or to a process that joined under this
// member's id), ErrUnknownMember when the group no longer knows the
// member. Committed only reports them; Poll acts on them (OnLost, a
// rejoin) when it meets them itself.
func (g *GroupConsumer) Committed(ctx context.Context) ([]GroupCommitted, error) {
	g.mu.Lock()
	who := g.who
	who.MemberEpoch = g.latest.MemberEpoch
	held := make([]TopicPartition, 0, len(g.parts))
	for tp := range g.parts {
		held = append(held, tp)
	}
	g.mu.Unlock()
	slices.SortFunc(held, func(a, b TopicPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	if len(held) == 0 {
		return nil, nil
	}
	req := &wire.GetCommittedRequest{Consumer: who}
	for _, tp := range held {
		req.Partitions = append(req.Partitions, wire.TopicPartition{Topic: tp.Topic, Partition: uint32(tp.Partition)})
	}
	var reply wire.GetCommittedReply
	if err := g.b.call(ctx, req, &reply); err != nil {
		return nil, err
	}
	out := make([]GroupCommitted, 0, len(held))
	for i, x := range reply.Partitions {
		if i >= len(held) {
			break
		}
		tp := held[i]
		out = append(out, GroupCommitted{TopicPartition: tp, Offset: x.Offset, Committed: x.HasOffset, History: x.History,
			Err: statusError("get-committed", tp.Topic, uint32(tp.Partition), x.Status, x.Message)})
	}
	return out, nil
}

// WithGroupMaxMessages bounds the records of one poll. The node shares n
// out among the partitions the poll reads (at least one record each) and
// returns whole batches, never a part of one: a partition delivers its
// first batch, and further ones only while its records stay within its
// share. A poll holds more than n records only when a first batch alone
// is larger than its partition's share, or when the member reads more
// partitions than n.
//
// Default 10000 (DefaultMaxMessages). Values below 1 keep the default.
func WithGroupMaxMessages(n int) GroupOption {
	return groupOption(func(c *groupConfig) {
		if n > 0 {
			c.maxMessages = n
		}
	})
}

// String returns "topic/partition".
func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }
