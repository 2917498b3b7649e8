package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// TestDescribeWithoutSkippedKeepsItsBytes: a describe request that does
// not ask for skipped offsets, and a reply without any, are the bytes
// they were before the field existed, so an older node serves the one and
// an older client decodes the other.
func TestDescribeWithoutSkippedKeepsItsBytes(t *testing.T) {
	topicReq, _ := (&wire.DescribeTopicRequest{Name: "t"}).Encode(nil)
	if want := []byte{1, 0, 't'}; !bytes.Equal(topicReq, want) {
		t.Fatalf("describe-topic request %x, want %x", topicReq, want)
	}
	asked, _ := (&wire.DescribeTopicRequest{Name: "t", WithSkipped: true}).Encode(nil)
	if want := []byte{1, 0, 't', 1}; !bytes.Equal(asked, want) {
		t.Fatalf("describe-topic request with skipped %x, want %x", asked, want)
	}
	groupReq, _ := (&wire.DescribeGroupRequest{Group: "g"}).Encode(nil)
	if want := []byte{1, 0, 'g'}; !bytes.Equal(groupReq, want) {
		t.Fatalf("describe-group request %x, want %x", groupReq, want)
	}

	ps := []wire.PartitionState{{Partition: 0, StartOffset: 2, HighWatermark: 9, History: 1}}
	plain, _ := (&wire.DescribeTopicReply{Partitions: ps}).Encode(nil)
	ps[0].Skipped = 4
	withSkipped, _ := (&wire.DescribeTopicReply{Partitions: ps}).Encode(nil)
	if !bytes.Equal(withSkipped[:len(plain)], plain) || len(withSkipped) != len(plain)+8 {
		t.Fatalf("skipped counts are not a last field: %x then %x", plain, withSkipped)
	}
	var got wire.DescribeTopicReply
	if err := got.Decode(withSkipped); err != nil || got.Partitions[0].Skipped != 4 {
		t.Fatalf("decoded %+v, %v: want 4 skipped", got.Partitions, err)
	}
	// A reused reply forgets the counts of the one before.
	if err := got.Decode(plain); err != nil || got.Partitions[0].Skipped != 0 {
		t.Fatalf("decoded %+v, %v: want none skipped", got.Partitions, err)
	}

	offs := []wire.GroupOffset{{Topic: "t", Resolved: 3, HighWatermark: 9}}
	plainGroup, _ := (&wire.DescribeGroupReply{Group: "g", Offsets: offs}).Encode(nil)
	offs[0].Skipped = 5
	skippedGroup, _ := (&wire.DescribeGroupReply{Group: "g", Offsets: offs}).Encode(nil)
	if len(skippedGroup) != len(plainGroup)+8 {
		t.Fatalf("group reply grew by %d bytes, want 8", len(skippedGroup)-len(plainGroup))
	}
	var g wire.DescribeGroupReply
	if err := g.Decode(skippedGroup); err != nil || g.Offsets[0].Skipped != 5 {
		t.Fatalf("decoded %+v, %v: want 5 skipped", g.Offsets, err)
	}
	if err := g.Decode(plainGroup); err != nil || g.Offsets[0].Skipped != 0 {
		t.Fatalf("decoded %+v, %v: want none skipped", g.Offsets, err)
	}
}

// TestDescribeSkippedHasOneEncoding: flags present and zero, unknown
// flag bits, and skipped counts that are all zero are refused.
func TestDescribeSkippedHasOneEncoding(t *testing.T) {
	for _, b := range [][]byte{{1, 0, 't', 0}, {1, 0, 't', 2}, {1, 0, 't', 1, 0}} {
		if err := new(wire.DescribeTopicRequest).Decode(b); !errors.Is(err, wire.StatusMalformedRequest) {
			t.Errorf("describe-topic %x: err %v, want malformed", b, err)
		}
		if err := new(wire.DescribeGroupRequest).Decode(b); !errors.Is(err, wire.StatusMalformedRequest) {
			t.Errorf("describe-group %x: err %v, want malformed", b, err)
		}
	}
	ps := []wire.PartitionState{{Partition: 0, HighWatermark: 9}}
	plain, _ := (&wire.DescribeTopicReply{Partitions: ps}).Encode(nil)
	zeros := append(plain, make([]byte, 8)...)
	if err := new(wire.DescribeTopicReply).Decode(zeros); err == nil {
		t.Error("describe-topic reply with all-zero skipped counts decoded")
	}
	offs := []wire.GroupOffset{{Topic: "t", HighWatermark: 9}}
	group, _ := (&wire.DescribeGroupReply{Group: "g", Offsets: offs}).Encode(nil)
	// group (2+1) | state | assignor | flags
	group[5] = 2
	group = append(group[:len(group)-2-4], append(make([]byte, 8), group[len(group)-2-4:]...)...)
	if err := new(wire.DescribeGroupReply).Decode(group); err == nil {
		t.Error("describe-group reply with the skipped flag and no count decoded")
	}
}
