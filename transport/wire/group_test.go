package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

// The group messages (kinds 0x0040–0x0044) get the same round-trip,
// truncation, framing and fuzz coverage as the messages of version 1.

func genTopicPartition(t *rapid.T) wire.TopicPartition {
	return wire.TopicPartition{Topic: genName(t, "topic"), Partition: rapid.Uint32().Draw(t, "partition")}
}

func genAssigned(t *rapid.T) wire.AssignedPartition {
	return wire.AssignedPartition{
		Topic: genName(t, "topic"), TopicID: genID(t, "topic id"),
		Partition: rapid.Uint32().Draw(t, "partition"), AssignmentEpoch: rapid.Uint64().Draw(t, "assignment epoch"),
	}
}

func genNames(t *rapid.T, label string) []string {
	return genSlice(t, 3, label, func(t *rapid.T) string { return genName(t, label) })
}

func genAssignor(t *rapid.T) wire.GroupAssignor {
	return wire.GroupAssignor(rapid.IntRange(0, 2).Draw(t, "assignor"))
}

func genGroupState(t *rapid.T) wire.GroupState {
	return wire.GroupState(rapid.IntRange(0, 2).Draw(t, "state"))
}

func genMemberAssignment(t *rapid.T) wire.MemberAssignment {
	return wire.MemberAssignment{
		MemberID:          genName(t, "member"),
		MemberEpoch:       rapid.Uint64().Draw(t, "member epoch"),
		HeartbeatInterval: genDuration(t, "heartbeat interval"),
		SessionTimeout:    genDuration(t, "session timeout"),
		Assignment:        genSlice(t, 4, "assignment", genAssigned),
	}
}

func genGroupMember(t *rapid.T) wire.GroupMember {
	return wire.GroupMember{
		MemberID:       genName(t, "member"),
		MemberEpoch:    rapid.Uint64().Draw(t, "member epoch"),
		SessionTimeout: genDuration(t, "session timeout"),
		Topics:         genNames(t, "topics"),
		Assignment:     genSlice(t, 3, "assignment", genAssigned),
		Revoking:       genSlice(t, 3, "revoking", genTopicPartition),
		Pending:        genSlice(t, 3, "pending", genTopicPartition),
		ClientID:       genName(t, "client id"),
		Host:           genName(t, "host"),
	}
}

func genGroupOffset(t *rapid.T) wire.GroupOffset {
	o := wire.GroupOffset{
		Topic: genName(t, "topic"), Partition: rapid.Uint32().Draw(t, "partition"),
		Status: genStatus(t), Message: genText(t, "message"), HasOffset: rapid.Bool().Draw(t, "has"),
		Resolved: rapid.Uint64().Draw(t, "resolved"), HighWatermark: rapid.Uint64().Draw(t, "hw"),
		MemberID: genName(t, "member"), Skipped: rapid.SampledFrom([]uint64{0, 0, 7, 1 << 20}).Draw(t, "skipped"),
	}
	if o.HasOffset {
		o.Offset, o.History = rapid.Uint64().Draw(t, "offset"), rapid.Uint64().Draw(t, "history")
	}
	return o
}

// groupMessageCases lists every group message.
func groupMessageCases() []messageCase {
	return []messageCase{
		{"JoinGroupRequest", custom(func(t *rapid.T) *wire.JoinGroupRequest {
			return &wire.JoinGroupRequest{
				Group: genName(t, "group"), MemberID: genName(t, "member"), Assignor: genAssignor(t),
				SessionTimeout: genDuration(t, "session"), RebalanceTimeout: genDuration(t, "rebalance"),
				Topics: genNames(t, "topics"), ClientID: genName(t, "client id"),
			}
		}), zeroOf[wire.JoinGroupRequest]()},
		{"JoinGroupReply", custom(func(t *rapid.T) *wire.JoinGroupReply {
			return &wire.JoinGroupReply{MemberAssignment: genMemberAssignment(t)}
		}), zeroOf[wire.JoinGroupReply]()},
		{"HeartbeatRequest", custom(func(t *rapid.T) *wire.HeartbeatRequest {
			return &wire.HeartbeatRequest{
				Group: genName(t, "group"), MemberID: genName(t, "member"),
				MemberEpoch: rapid.Uint64().Draw(t, "member epoch"), Owned: genSlice(t, 4, "owned", genTopicPartition),
			}
		}), zeroOf[wire.HeartbeatRequest]()},
		{"HeartbeatReply", custom(func(t *rapid.T) *wire.HeartbeatReply {
			return &wire.HeartbeatReply{MemberAssignment: genMemberAssignment(t)}
		}), zeroOf[wire.HeartbeatReply]()},
		{"LeaveGroupRequest", custom(func(t *rapid.T) *wire.LeaveGroupRequest {
			return &wire.LeaveGroupRequest{Group: genName(t, "group"), MemberID: genName(t, "member"),
				MemberEpoch: rapid.Uint64().Draw(t, "member epoch")}
		}), zeroOf[wire.LeaveGroupRequest]()},
		{"LeaveGroupReply", rapid.Just[wire.Message](&wire.LeaveGroupReply{}), zeroOf[wire.LeaveGroupReply]()},
		{"DescribeGroupRequest", custom(func(t *rapid.T) *wire.DescribeGroupRequest {
			return &wire.DescribeGroupRequest{Group: genName(t, "group"), WithSkipped: rapid.Bool().Draw(t, "with skipped")}
		}), zeroOf[wire.DescribeGroupRequest]()},
		{"DescribeGroupReply", custom(func(t *rapid.T) *wire.DescribeGroupReply {
			return &wire.DescribeGroupReply{
				Group: genName(t, "group"), State: genGroupState(t), Assignor: genAssignor(t),
				GroupEpoch: rapid.Uint64().Draw(t, "group epoch"),
				Members:    genSlice(t, 3, "members", genGroupMember),
				Offsets:    genSlice(t, 3, "offsets", genGroupOffset),
				Policy:     genPolicy(t),
			}
		}), zeroOf[wire.DescribeGroupReply]()},
		{"ListGroupsRequest", rapid.Just[wire.Message](&wire.ListGroupsRequest{}), zeroOf[wire.ListGroupsRequest]()},
		{"DeleteGroupRequest", custom(func(t *rapid.T) *wire.DeleteGroupRequest {
			return &wire.DeleteGroupRequest{Group: genName(t, "group")}
		}), zeroOf[wire.DeleteGroupRequest]()},
		{"DeleteGroupReply", rapid.Just[wire.Message](&wire.DeleteGroupReply{}), zeroOf[wire.DeleteGroupReply]()},
		{"ListGroupsReply", custom(func(t *rapid.T) *wire.ListGroupsReply {
			return &wire.ListGroupsReply{Groups: genSlice(t, 3, "groups", func(t *rapid.T) wire.GroupSummary {
				return wire.GroupSummary{
					Group: genName(t, "group"), State: genGroupState(t), Assignor: genAssignor(t),
					GroupEpoch: rapid.Uint64().Draw(t, "group epoch"), Members: rapid.Uint32().Draw(t, "members"),
					Topics: genNames(t, "topics"),
				}
			})}
		}), zeroOf[wire.ListGroupsReply]()},
	}
}

func TestGroupMessageKinds(t *testing.T) {
	want := map[string]wire.Kind{
		"JoinGroup": wire.KindJoinGroup, "Heartbeat": wire.KindHeartbeat, "LeaveGroup": wire.KindLeaveGroup,
		"DescribeGroup": wire.KindDescribeGroup, "ListGroups": wire.KindListGroups,
		"DeleteGroup": wire.KindDeleteGroup,
	}
	seen := map[wire.Kind]int{}
	for _, c := range groupMessageCases() {
		base := strings.TrimSuffix(strings.TrimSuffix(c.name, "Request"), "Reply")
		if k := c.zero().Kind(); k != want[base] {
			t.Errorf("%s: kind %v, want %v", c.name, k, want[base])
		}
		seen[c.zero().Kind()]++
	}
	for _, k := range want {
		if seen[k] != 2 {
			t.Errorf("%v: %d message types, want a request and a reply", k, seen[k])
		}
	}
}

func TestGroupEncodeRefusesWhatCannotDecode(t *testing.T) {
	long := strings.Repeat("x", wire.MaxNameLen+1)
	cases := []struct {
		name string
		m    wire.Message
		want wire.Status
	}{
		{"long group", &wire.JoinGroupRequest{Group: long}, wire.StatusInvalidArgument},
		{"long subscribed topic", &wire.JoinGroupRequest{Topics: []string{long}}, wire.StatusInvalidArgument},
		{"unknown assignor", &wire.JoinGroupRequest{Assignor: 9}, wire.StatusInvalidArgument},
		{"negative session timeout", &wire.JoinGroupRequest{SessionTimeout: -1}, wire.StatusInvalidArgument},
		{"negative interval", &wire.HeartbeatReply{MemberAssignment: wire.MemberAssignment{HeartbeatInterval: -1}},
			wire.StatusInvalidArgument},
		{"invalid UTF-8 owned topic", &wire.HeartbeatRequest{Owned: []wire.TopicPartition{{Topic: "\xff"}}},
			wire.StatusInvalidArgument},
		{"unknown state", &wire.DescribeGroupReply{State: 7}, wire.StatusInvalidArgument},
		{"offset without has-offset", &wire.DescribeGroupReply{Offsets: []wire.GroupOffset{{Offset: 1}}},
			wire.StatusInvalidArgument},
		{"unknown assignor in a listing", &wire.ListGroupsReply{Groups: []wire.GroupSummary{{Assignor: 3}}},
			wire.StatusInvalidArgument},
		{"long policy name", &wire.DescribeGroupReply{Policy: wire.Filter{Name: long}}, wire.StatusInvalidArgument},
		{"long group to delete", &wire.DeleteGroupRequest{Group: long}, wire.StatusInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.m.Encode([]byte("keep"))
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}

func TestGroupDecodeRefusesReservedBytes(t *testing.T) {
	body, err := (&wire.JoinGroupRequest{Group: "g", Topics: []string{"t"}}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	// group (2+1) | member id (2) | assignor (1) | flags (1)
	body[6] = 2
	if err := new(wire.JoinGroupRequest).Decode(body); !errors.Is(err, wire.StatusMalformedRequest) {
		t.Fatalf("unknown flag: err %v", err)
	}
	body[6] = 1 // a client id is announced and absent
	if err := new(wire.JoinGroupRequest).Decode(body); !errors.Is(err, wire.StatusMalformedRequest) {
		t.Fatalf("client id flag without the client id: err %v", err)
	}
}

// A join request and a describe reply in the first layout (no client id,
// flags byte reserved as zero) still decode, with the new fields empty;
// a new one carries them.
func TestGroupClientInfoFirstLayout(t *testing.T) {
	join := []byte{
		1, 0, 'g', // group
		0, 0, // member id
		1, 0, // assignor range, reserved
		0, 0, 0, 0, 0, 0, 0, 0, // session timeout
		0, 0, 0, 0, 0, 0, 0, 0, // rebalance timeout
		1, 0, 0, 0, 1, 0, 't', // topics ["t"]
	}
	var jr wire.JoinGroupRequest
	if err := jr.Decode(join); err != nil {
		t.Fatalf("first-layout join: %v", err)
	}
	if jr.Group != "g" || jr.Assignor != wire.AssignorRange || len(jr.Topics) != 1 || jr.ClientID != "" {
		t.Fatalf("first-layout join decoded as %+v", jr)
	}
	again, err := (&wire.JoinGroupRequest{Group: "g", Assignor: wire.AssignorRange, Topics: []string{"t"}}).Encode(nil)
	if err != nil || string(again) != string(join) {
		t.Fatalf("a join without client id encodes as %v (%v), want the first layout %v", again, err, join)
	}
	withID, err := (&wire.JoinGroupRequest{Group: "g", Topics: []string{"t"}, ClientID: "sensor-7"}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	jr = wire.JoinGroupRequest{}
	if err := jr.Decode(withID); err != nil || jr.ClientID != "sensor-7" {
		t.Fatalf("join with client id decoded as %+v (%v)", jr, err)
	}

	old, err := (&wire.DescribeGroupReply{Group: "g", Members: []wire.GroupMember{{MemberID: "m"}}}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	// group (2+1) | state (1) | assignor (1) | flags (1): zero, as reserved
	if old[5] != 0 {
		t.Fatalf("describe reply without client info has flags %d, want the reserved zero", old[5])
	}
	var dr wire.DescribeGroupReply
	if err := dr.Decode(old); err != nil || len(dr.Members) != 1 || dr.Members[0].ClientID != "" || dr.Members[0].Host != "" {
		t.Fatalf("first-layout describe decoded as %+v (%v)", dr, err)
	}
	old[5] = 1 // flagged, yet no member has a client id or host: a second encoding
	if err := dr.Decode(old); !errors.Is(err, wire.StatusMalformedRequest) {
		t.Fatalf("client-info flag on a reply without client info: err %v", err)
	}
	body, err := (&wire.DescribeGroupReply{Group: "g", Members: []wire.GroupMember{
		{MemberID: "a"}, {MemberID: "b", ClientID: "sensor-7", Host: "192.0.2.7"},
	}}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	dr = wire.DescribeGroupReply{}
	if err := dr.Decode(body); err != nil {
		t.Fatal(err)
	}
	if m := dr.Members[1]; m.ClientID != "sensor-7" || m.Host != "192.0.2.7" || dr.Members[0].ClientID != "" {
		t.Fatalf("members decoded as %+v", dr.Members)
	}
}

func FuzzDecodeJoinGroupRequest(f *testing.F)     { fuzzDecoder(f, "JoinGroupRequest") }
func FuzzDecodeJoinGroupReply(f *testing.F)       { fuzzDecoder(f, "JoinGroupReply") }
func FuzzDecodeHeartbeatRequest(f *testing.F)     { fuzzDecoder(f, "HeartbeatRequest") }
func FuzzDecodeHeartbeatReply(f *testing.F)       { fuzzDecoder(f, "HeartbeatReply") }
func FuzzDecodeLeaveGroupRequest(f *testing.F)    { fuzzDecoder(f, "LeaveGroupRequest") }
func FuzzDecodeLeaveGroupReply(f *testing.F)      { fuzzDecoder(f, "LeaveGroupReply") }
func FuzzDecodeDescribeGroupRequest(f *testing.F) { fuzzDecoder(f, "DescribeGroupRequest") }
func FuzzDecodeDescribeGroupReply(f *testing.F)   { fuzzDecoder(f, "DescribeGroupReply") }
func FuzzDecodeListGroupsRequest(f *testing.F)    { fuzzDecoder(f, "ListGroupsRequest") }
func FuzzDecodeListGroupsReply(f *testing.F)      { fuzzDecoder(f, "ListGroupsReply") }
func FuzzDecodeDeleteGroupRequest(f *testing.F)   { fuzzDecoder(f, "DeleteGroupRequest") }
