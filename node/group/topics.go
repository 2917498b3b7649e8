package group

import (
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/transport/wire"
)

// TopicFunc looks up a live topic for the coordinator: its id, the
// assigners of its partitions (their owners, or wrappers around them) and
// their logs, by partition index. ok is false when there is none.
type TopicFunc func(name string) (id fence.TopicID, parts []PartitionAssigner, logs []owner.PartitionLog, ok bool)

// StatusFunc maps an error met reading a group's offset to the status and
// message its GroupOffset carries (the node's node.StatusOf).
type StatusFunc func(error) (wire.Status, string)

// FuncTopics returns the GroupTopics of topics kept by a caller that
// builds its own owners (a simulator, a test): GroupOffset reads and
// resolves the group's bookmark on the partition's log, as the node does,
// and status maps what fails.
func FuncTopics(lookup TopicFunc, status StatusFunc) GroupTopics {
	return funcTopics{lookup: lookup, status: status}
}

type funcTopics struct {
	lookup TopicFunc
	status StatusFunc
}

func (f funcTopics) GroupTopic(name string) (fence.TopicID, []PartitionAssigner, bool) {
	id, parts, _, ok := f.lookup(name)
	return id, parts, ok
}

func (f funcTopics) GroupOffset(topic string, partition uint32, group string) wire.GroupOffset {
	id, _, logs, ok := f.lookup(topic)
	if !ok || int(partition) >= len(logs) {
		return wire.GroupOffset{Topic: topic, Partition: partition, Status: wire.StatusUnknownPartition}
	}
	o, err := ResolveOffset(id, partition, logs[partition], group)
	if err != nil {
		o.Status, o.Message = f.status(err)
	}
	o.Topic = topic
	return o
}
