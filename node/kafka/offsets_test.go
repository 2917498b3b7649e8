package kafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ledgemq/ledge/transport/wire"
)

// offsetsSession has a group with no committed offset anywhere; a
// token that may consume topic "t" only.
type offsetsSession struct{ nopSession }

func (offsetsSession) Authorize(_ context.Context, topic string, _ int32, _ wire.Scope) error {
	if topic != "t" {
		return &wire.Error{Status: wire.StatusForbidden, Message: "not this topic"}
	}
	return nil
}

func (offsetsSession) DescribeTopic(_ context.Context, m *wire.DescribeTopicRequest) (*wire.DescribeTopicReply, error) {
	return &wire.DescribeTopicReply{Partitions: make([]wire.PartitionState, 2)}, nil
}

func (offsetsSession) ResetPosition(_ context.Context, m *wire.ResetPositionRequest) (*wire.ResetPositionReply, error) {
	return &wire.ResetPositionReply{Partitions: make([]wire.OffsetResult, len(m.Partitions))}, nil
}

func (offsetsSession) GroupOffsets(_ context.Context, _ string, ps []wire.TopicPartition) ([]wire.GroupOffset, error) {
	out := make([]wire.GroupOffset, len(ps))
	for i, p := range ps {
		out[i] = wire.GroupOffset{Topic: p.Topic, Partition: p.Partition, HasOffset: true, Offset: 7, Resolved: 7}
	}
	return out, nil
}

// TestNegativeCommitIsNoPosition: a member at its generation, on a
// partition it was assigned, commits -1 and reads -1 back; a commit of
// -1 from a stale generation, on a partition the member does not hold,
// or by an unknown member is refused, and leaves the position as it was;
// a commit of an offset afterwards is read back again.
func TestNegativeCommitIsNoPosition(t *testing.T) {
	cc := &conn{s: &Server{groups: newClassicGroups()}, sess: offsetsSession{}}
	cc.s.groups.update("g", "m", func(cm *classicMember) {
		cm.epoch, cm.synced = 5, []wire.TopicPartition{{Topic: "t", Partition: 0}}
	})
	commitAt := func(member string, generation int32, partition int32, offset int64) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 7, "g", member, generation
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: partition, Offset: offset, LeaderEpoch: -1}}}}
		return cc.offsetCommit(context.Background(), req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	commit := func(member string, generation int32, partition int32) int16 {
		return commitAt(member, generation, partition, -1)
	}
	fetched := func(partition int32) int64 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = 7, "g"
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{partition}}}
		return cc.offsetFetch(context.Background(), req).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0].Offset
	}
	for _, c := range []struct {
		name                  string
		member                string
		generation, partition int32
		want                  int16
	}{
		{"an unknown member", "other", 5, 0, kerr.UnknownMemberID.Code},
		{"a stale generation", "m", 4, 0, kerr.IllegalGeneration.Code},
		{"a partition not held", "m", 5, 1, kerr.IllegalGeneration.Code},
	} {
		if code := commit(c.member, c.generation, c.partition); code != c.want {
			t.Errorf("%s committing -1: %v, want %v", c.name, kerr.ErrorForCode(code), kerr.ErrorForCode(c.want))
		}
	}
	if got := fetched(0); got != 7 {
		t.Fatalf("after refused commits of -1, OffsetFetch says %d, want 7", got)
	}
	if code := commit("m", 5, 0); code != 0 {
		t.Fatalf("the member committing -1 on its partition: %v", kerr.ErrorForCode(code))
	}
	if got := fetched(0); got != -1 {
		t.Fatalf("after a commit of -1, OffsetFetch says %d, want -1", got)
	}
	if got := fetched(1); got != 7 {
		t.Fatalf("another partition reads %d, want 7", got)
	}
	if code := commitAt("m", 5, 0, 7); code != 0 {
		t.Fatalf("the member committing 7: %v", kerr.ErrorForCode(code))
	}
	if got := fetched(0); got != 7 {
		t.Fatalf("after a commit of 7, OffsetFetch says %d, want 7", got)
	}
}

// TestNoPositionForgottenWithTopicAndGroup: the "no position" a group
// committed is dropped when its topic or its group is deleted: what the
// node stores for the name afterwards (a topic created again, a group
// that commits through the QUIC protocol) is what OffsetFetch answers.
func TestNoPositionForgottenWithTopicAndGroup(t *testing.T) {
	for _, deleted := range []string{"topic", "group"} {
		t.Run(deleted, func(t *testing.T) {
			s := &Server{groups: newClassicGroups()}
			cc := &conn{s: s, sess: offsetsSession{}}
			for _, g := range []string{"g", "other"} {
				cc.s.groups.update(g, "m", func(cm *classicMember) {
					cm.epoch, cm.synced = 5, []wire.TopicPartition{{Topic: "t", Partition: 0}}
				})
			}
			fetched := func(group string) int64 {
				req := kmsg.NewPtrOffsetFetchRequest()
				req.Version, req.Group = 7, group
				req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
				return cc.offsetFetch(context.Background(), req).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0].Offset
			}
			for _, g := range []string{"g", "other"} {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Version, req.Group, req.MemberID, req.Generation = 7, g, "m", 5
				req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: -1, LeaderEpoch: -1}}}}
				if code := cc.offsetCommit(context.Background(), req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Fatalf("group %s committing -1: %v", g, kerr.ErrorForCode(code))
				}
				if got := fetched(g); got != -1 {
					t.Fatalf("group %s after committing -1 reads %d", g, got)
				}
			}
			want := map[string]int64{"g": 7, "other": 7}
			if deleted == "topic" {
				s.TopicDeleted("t")
			} else {
				s.GroupDeleted("g")
				want["other"] = -1
			}
			for g, w := range want {
				if got := fetched(g); got != w {
					t.Errorf("after the %s was deleted, group %s reads %d, want %d (what the node stores)", deleted, g, got, w)
				}
			}
		})
	}
}
