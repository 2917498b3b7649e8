package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
	"github.com/ledgemq/ledge/transport/wire"
)

// newTestGroups is a coordinator over one topic of in-memory partitions,
// its owners answering to it, as the node wires them.
func newTestGroups(t *testing.T, topic string, partitions int) *group.Groups {
	t.Helper()
	meta := ownertest.NewMeta()
	id := fence.TopicID{0x9a, 1}
	members := &lateMembers{}
	var parts []group.PartitionAssigner
	var logs []owner.PartitionLog
	for i := range partitions {
		l := ownertest.NewLog(meta, topic+"/"+string(rune('0'+i)))
		o, err := owner.NewOwner(owner.OwnerConfig{Topic: id, Partition: uint32(i), Log: l, Meta: meta, Members: members})
		if err != nil {
			t.Fatal(err)
		}
		parts, logs = append(parts, o), append(logs, l)
	}
	lookup := func(name string) (fence.TopicID, []group.PartitionAssigner, []owner.PartitionLog, bool) {
		return id, parts, logs, name == topic
	}
	gs, err := group.OpenGroups(group.GroupsConfig{
		Meta: meta, Topics: group.FuncTopics(lookup, StatusOf), Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	members.gs = gs
	return gs
}

// lateMembers answers for a coordinator opened after the owners that ask
// it.
type lateMembers struct{ gs *group.Groups }

func (m *lateMembers) Member(g, member string) (bool, fence.MemberEpoch) {
	return m.gs.Member(g, member)
}

func TestGroupHandlers(t *testing.T) {
	ctx := context.Background()
	n := newTestNode(t)
	gs := newTestGroups(t, "t", 2)
	n.groups = gs
	allowAll := n.session(wire.AllTopics, wire.ScopeConsume).Call(0)
	deny := n.session("other", wire.ScopeConsume).Call(0)
	if _, err := deny.JoinGroup(ctx, &wire.JoinGroupRequest{Group: "g", Topics: []string{"t"}}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("join without the scope: %v", err)
	}
	j, err := allowAll.JoinGroup(ctx, &wire.JoinGroupRequest{Group: "g", Topics: []string{"t"}, ClientID: "sensor-7"})
	if err != nil {
		t.Fatal(err)
	}
	if j.MemberID == "" || len(j.Assignment) != 2 || j.HeartbeatInterval <= 0 || j.SessionTimeout <= 0 {
		t.Fatalf("join reply %+v", j)
	}
	hb, err := allowAll.Heartbeat(ctx, &wire.HeartbeatRequest{Group: "g", MemberID: j.MemberID, MemberEpoch: j.MemberEpoch,
		Owned: []wire.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}})
	if err != nil || hb.MemberEpoch != j.MemberEpoch {
		t.Fatalf("heartbeat: %+v, %v", hb, err)
	}
	d, err := allowAll.DescribeGroup(ctx, &wire.DescribeGroupRequest{Group: "g"})
	if err != nil || d.State != wire.GroupStable || len(d.Members) != 1 || len(d.Offsets) != 2 || d.Offsets[0].MemberID != j.MemberID {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	if m := d.Members[0]; m.ClientID != "sensor-7" || m.Host != "192.0.2.7" {
		t.Fatalf("described member has client id %q and host %q, want the join's sensor-7 from the session's 192.0.2.7", m.ClientID, m.Host)
	}
	l, err := allowAll.ListGroups(ctx, &wire.ListGroupsRequest{})
	if err != nil || len(l.Groups) != 1 || l.Groups[0].Members != 1 || l.Groups[0].Topics[0] != "t" {
		t.Fatalf("list: %+v, %v", l, err)
	}
	if _, err := allowAll.DeleteGroup(ctx, &wire.DeleteGroupRequest{Group: "g"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("delete a group without the admin scope: %v", err)
	}
	if _, err := allowAll.LeaveGroup(ctx, &wire.LeaveGroupRequest{Group: "g", MemberID: j.MemberID}); err != nil {
		t.Fatal(err)
	}
	if d := gs.Describe("g"); d.State != wire.GroupEmpty || len(d.Members) != 0 {
		t.Fatalf("after leave: %+v", d)
	}
	if d := gs.Describe("nope"); d.State != wire.GroupEmpty || d.Group != "nope" {
		t.Fatalf("unknown group: %+v", d)
	}
	// Encoded through the wire: the replies are valid messages.
	for _, m := range []wire.Message{j, hb, d, l} {
		if _, err := m.Encode(nil); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
	}
}
