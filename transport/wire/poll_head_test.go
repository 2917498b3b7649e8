package wire

import (
	"bytes"
	"testing"
)

func pollReplyFrame(t testing.TB, id uint32, parts ...PollPartitionReply) []byte {
	t.Helper()
	f, err := AppendReply(nil, id, &PollReply{Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestParsePollReplyHead: the start of a poll reply, cut anywhere after
// the first partition's batches length, says what the whole reply says
// of that partition; cut before, or any other frame, it says nothing.
func TestParsePollReplyHead(t *testing.T) {
	first := PollPartitionReply{Status: StatusOK, TopicID: [16]byte{1, 2}, History: 3, StartOffset: 4,
		HighWatermark: 900, Next: 812, Token: bytes.Repeat([]byte{7}, 88), Payload: PayloadStored,
		Batches: bytes.Repeat([]byte{9}, 4096)}
	second := PollPartitionReply{Status: StatusOK, Next: 5, Batches: []byte{1, 2, 3}}
	frame := pollReplyFrame(t, 42, first, second)

	var whole PollReply
	h, _, _ := ParseFrameHeader(frame, len(frame))
	if err := DecodeReply(Frame{FrameHeader: h, Body: frame[FrameHeaderSize:]}, &whole); err != nil {
		t.Fatal(err)
	}
	headEnd := bytes.Index(frame, first.Batches) // the first partition's batches start here
	for cut := 0; cut <= len(frame); cut++ {
		hd, ok := ParsePollReplyHead(frame[:cut])
		if ok != (cut >= headEnd) {
			t.Fatalf("cut at %d (the head ends at %d): ok %v", cut, headEnd, ok)
		}
		if !ok {
			continue
		}
		w := whole.Partitions[0]
		if hd.ID != 42 || hd.Partitions != 2 || hd.BatchesLen != len(first.Batches) || hd.First.Next != w.Next ||
			hd.First.History != w.History || hd.First.HighWatermark != w.HighWatermark || !bytes.Equal(hd.First.Token, w.Token) {
			t.Fatalf("cut at %d: head %+v, want what the whole reply says: %+v", cut, hd, w)
		}
	}

	for name, f := range map[string][]byte{
		"an error reply":   AppendErrorReply(nil, FrameHeader{Kind: KindPoll, ID: 42}, StatusBusy, "busy"),
		"another kind":     func() []byte { f, _ := AppendReply(nil, 42, &CommitReply{}); return f }(),
		"a request":        func() []byte { f, _ := AppendRequest(nil, 42, &PollRequest{}); return f }(),
		"no partitions":    pollReplyFrame(t, 42),
		"a wrong version":  func() []byte { f := bytes.Clone(frame); f[4]++; return f }(),
		"a bad token size": func() []byte { f := bytes.Clone(frame); f[headEnd-4-1-88-1] = 0xff; return f }(),
	} {
		if hd, ok := ParsePollReplyHead(f); ok {
			t.Errorf("%s: parsed as a poll reply head %+v", name, hd)
		}
	}
}

// FuzzParsePollReplyHead: arbitrary bytes never panic, and a head it
// accepts from a whole frame agrees with the frame's decoding.
func FuzzParsePollReplyHead(f *testing.F) {
	f.Add(pollReplyFrame(f, 1, PollPartitionReply{Next: 3, Token: []byte{1}, Batches: []byte{1, 2}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		hd, ok := ParsePollReplyHead(b)
		if !ok {
			return
		}
		h, n, err := ParseFrameHeader(b, len(b))
		if err != nil || n != len(b)-FrameHeaderSize {
			return // a cut frame: only its head is known
		}
		var whole PollReply
		if DecodeReply(Frame{FrameHeader: h, Body: b[FrameHeaderSize:]}, &whole) != nil {
			return // the rest is malformed; decoding the whole frame says so
		}
		if whole.Partitions[0].Next != hd.First.Next || len(whole.Partitions) != hd.Partitions {
			t.Fatalf("head %+v, whole %+v", hd, whole.Partitions[0])
		}
	})
}
