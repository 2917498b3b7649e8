package ops

import (
	"fmt"
	"slices"

	"github.com/ledgemq/ledge/transport/wire"
)

// GroupDescriber is what the status page reads of the group coordinator;
// *Groups is one.
type GroupDescriber interface {
	List() []wire.GroupSummary
	Describe(name string) wire.DescribeGroupReply
}

// AttachGroups hands the server the node's group coordinator: the status
// page then shows every group's state, members and who holds which
// partition, also for groups that never committed. Stopping detaches it
// with the node.
func (s *HTTPServer) AttachGroups(g GroupDescriber) { s.m.ref.setGroups(g) }

// addGroups merges what the coordinator says of its groups into the
// consumers found from bookmarks. Called with the node attached.
func addGroups(gs GroupDescriber, consumers []ConsumerStatus) []ConsumerStatus {
	if gs == nil {
		return consumers
	}
	for _, sum := range gs.List() {
		d := gs.Describe(sum.Group)
		members := make([]MemberStatus, 0, len(d.Members))
		holder := map[string]map[uint32]string{} // topic → partition → member
		for _, m := range d.Members {
			ms := MemberStatus{ID: m.MemberID, ClientID: m.ClientID, Host: m.Host, Epoch: m.MemberEpoch, Assignments: []string{}}
			for _, a := range m.Assignment {
				ms.Assignments = append(ms.Assignments, fmt.Sprintf("%s/%d", a.Topic, a.Partition))
				if holder[a.Topic] == nil {
					holder[a.Topic] = map[uint32]string{}
				}
				holder[a.Topic][a.Partition] = m.MemberID
			}
			members = append(members, ms)
		}
		topics := map[string]bool{}
		for i := range consumers {
			c := &consumers[i]
			if c.Kind != "group" || c.Name != sum.Group {
				continue
			}
			topics[c.Topic] = true
			c.State, c.Epoch, c.Members = d.State.String(), d.GroupEpoch, members
			for j := range c.Partitions {
				c.Partitions[j].Member = holder[c.Topic][c.Partitions[j].Partition]
			}
		}
		// A group that has not committed on a topic yet still shows.
		for _, topic := range sum.Topics {
			if topics[topic] {
				continue
			}
			consumers = append(consumers, ConsumerStatus{
				Name: sum.Group, Kind: "group", Topic: topic, Partitions: []ConsumerPartition{},
				State: d.State.String(), Epoch: d.GroupEpoch, Members: slices.Clone(members),
			})
		}
	}
	return consumers
}
