package ops

import (
	"reflect"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// fakeGroups is a coordinator with one group of two members.
type fakeGroups struct{}

func (fakeGroups) List() []wire.GroupSummary {
	return []wire.GroupSummary{{Group: "shipping", State: wire.GroupStable, GroupEpoch: 7, Members: 2, Topics: []string{"orders", "returns"}}}
}

func (fakeGroups) Describe(name string) wire.DescribeGroupReply {
	return wire.DescribeGroupReply{Group: name, State: wire.GroupStable, GroupEpoch: 7, Members: []wire.GroupMember{
		{MemberID: "m1", MemberEpoch: 7, Assignment: []wire.AssignedPartition{{Topic: "orders", Partition: 0, AssignmentEpoch: 5}}},
		{MemberID: "m2", MemberEpoch: 7, ClientID: "sensor-7", Host: "192.0.2.7", Assignment: []wire.AssignedPartition{{Topic: "orders", Partition: 1, AssignmentEpoch: 7}}},
	}}
}

func TestAddGroups(t *testing.T) {
	in := []ConsumerStatus{
		{Name: "billing", Kind: "consumer", Topic: "orders", Partitions: []ConsumerPartition{{Partition: 0}}},
		{Name: "shipping", Kind: "group", Topic: "orders", Lag: 3, Partitions: []ConsumerPartition{{Partition: 0, Lag: 1}, {Partition: 1, Lag: 2}}},
	}
	out := addGroups(fakeGroups{}, in)
	if len(out) != 3 {
		t.Fatalf("%d consumers: %+v", len(out), out)
	}
	if out[0].Members != nil || out[0].State != "" {
		t.Errorf("a named consumer got group fields: %+v", out[0])
	}
	g := out[1]
	if g.State != wire.GroupStable.String() || g.Epoch != 7 || len(g.Members) != 2 ||
		g.Partitions[0].Member != "m1" || g.Partitions[1].Member != "m2" ||
		!reflect.DeepEqual(g.Members[1], MemberStatus{ID: "m2", ClientID: "sensor-7", Host: "192.0.2.7", Epoch: 7, Assignments: []string{"orders/1"}}) {
		t.Errorf("group on orders: %+v", g)
	}
	// The group has not committed on "returns": it shows, without lag.
	if r := out[2]; r.Name != "shipping" || r.Topic != "returns" || r.Lag != 0 || len(r.Members) != 2 {
		t.Errorf("group on returns: %+v", r)
	}
	if got := addGroups(nil, in); len(got) != 2 {
		t.Errorf("no coordinator: %+v", got)
	}
}
