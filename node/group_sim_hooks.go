package node

import (
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// GroupTopicFunc looks up a live topic for the group coordinator: its id,
// the assigners of its partitions (their owners, or wrappers around them)
// and their logs, by partition index. ok is false when there is none.
type GroupTopicFunc func(name string) (id fence.TopicID, parts []group.PartitionAssigner, logs []owner.PartitionLog, ok bool)

// NewGroupTopics returns the GroupTopics of a set of topics kept outside
// a Node (a harness that builds its own owners), answering as the node's
// own does: GroupOffset reads and resolves the group's bookmark on the
// partition's log.
func NewGroupTopics(lookup GroupTopicFunc) group.GroupTopics { return funcGroupTopics(lookup) }

type funcGroupTopics GroupTopicFunc

func (f funcGroupTopics) GroupTopic(name string) (fence.TopicID, []group.PartitionAssigner, bool) {
	id, parts, _, ok := f(name)
	return id, parts, ok
}

func (f funcGroupTopics) GroupOffset(topic string, partition uint32, group string) wire.GroupOffset {
	id, _, logs, ok := f(topic)
	if !ok || int(partition) >= len(logs) {
		return wire.GroupOffset{Topic: topic, Partition: partition, Status: wire.StatusUnknownPartition}
	}
	o := groupOffsetOf(id, partition, logs[partition], group)
	o.Topic = topic
	return o
}
