package wire

import (
	"bytes"
	"testing"
)

// TestPollReplyFrameParts: the parts of AppendFrameParts, written back to
// back, are the frame AppendReply appends, and the batch parts are not
// copied.
func TestPollReplyFrameParts(t *testing.T) {
	b1 := bytes.Repeat([]byte{1}, 300)
	b2 := bytes.Repeat([]byte{2}, 70)
	b3 := bytes.Repeat([]byte{3}, 5)
	m := &PollReply{Partitions: []PollPartitionReply{
		{TopicID: [16]byte{9}, History: 2, StartOffset: 1, HighWatermark: 50, Next: 40, Token: []byte("tok"),
			Payload: PayloadStored, BatchParts: [][]byte{b1, b2}},
		{Status: StatusUnknownPartition, Message: "no such partition"},
		{Next: 7, Batches: []byte("inline"), BatchParts: [][]byte{nil, b3}},
	}}
	want, err := AppendReply([]byte("prefix"), 77, m)
	if err != nil {
		t.Fatal(err)
	}
	buf, parts, err := m.AppendFrameParts([]byte("prefix"), nil, 77)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf, []byte("prefix")) {
		t.Fatalf("buffer lost its prefix")
	}
	var got []byte
	shared := 0
	for _, p := range parts {
		got = append(got, p...)
		for _, b := range [][]byte{b1, b2, b3} {
			if len(p) > 0 && &p[0] == &b[0] {
				shared++
			}
		}
	}
	if !bytes.Equal(got, want[len("prefix"):]) {
		t.Fatalf("parts join to %x\nwant %x", got, want[len("prefix"):])
	}
	if shared != 3 {
		t.Fatalf("%d batch parts written in place, want 3", shared)
	}
	f, err := FrameLen(got[:FrameHeaderSize])
	if err != nil || f != len(got) {
		t.Fatalf("frame length %d, %v; want %d", f, err, len(got))
	}
}
