package wire_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
	"pgregory.net/rapid"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, c := range messageCases() {
		t.Run(c.name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				m := c.gen.Draw(rt, "message")
				prefix := []byte("prefix")
				out, err := m.Encode(append([]byte(nil), prefix...))
				if err != nil {
					rt.Fatalf("encode: %v", err)
				}
				if !bytes.HasPrefix(out, prefix) {
					rt.Fatalf("encode did not append: %q", out)
				}
				body := out[len(prefix):]

				got := c.zero()
				if err := got.Decode(body); err != nil {
					rt.Fatalf("decode: %v", err)
				}
				if !reflect.DeepEqual(got, m) {
					rt.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
				}
				again, err := got.Encode(nil)
				if err != nil || !bytes.Equal(again, body) {
					rt.Fatalf("re-encoding differs (err %v)", err)
				}

				// A message reused from another frame decodes to the same value.
				reused := c.zero()
				other, err := c.gen.Draw(rt, "other").Encode(nil)
				if err != nil {
					rt.Fatalf("encode other: %v", err)
				}
				if err := reused.Decode(other); err != nil {
					rt.Fatalf("decode other: %v", err)
				}
				if err := reused.Decode(body); err != nil {
					rt.Fatalf("decode into reused: %v", err)
				}
				if again, _ := reused.Encode(nil); !bytes.Equal(again, body) {
					rt.Fatalf("decoding into a reused message kept old state:\n got %+v\nwant %+v", reused, m)
				}
			})
		})
	}
}

// Every strict prefix of a valid body, and the body with a byte appended,
// fails to decode with StatusMalformedRequest. The exception is a body
// cut just before an optional last field (a poll's key, a describe's
// flags or skipped counts): that prefix is the whole encoding of the
// message without it.
func TestMessageTruncatedAndTrailing(t *testing.T) {
	for _, c := range messageCases() {
		t.Run(c.name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				body, err := c.gen.Draw(rt, "message").Encode(nil)
				if err != nil {
					rt.Fatalf("encode: %v", err)
				}
				for i := range len(body) {
					short := c.zero()
					err := short.Decode(body[:i])
					if pr, ok := short.(*wire.PollRequest); ok && err == nil && pr.Key.Mode == wire.KeyAny {
						if again, _ := pr.Encode(nil); bytes.Equal(again, body[:i]) {
							continue
						}
					}
					if optionalLastField(short) && err == nil {
						if again, _ := short.Encode(nil); bytes.Equal(again, body[:i]) {
							continue
						}
					}
					if !errors.Is(err, wire.StatusMalformedRequest) {
						rt.Fatalf("prefix of %d/%d bytes: err %v", i, len(body), err)
					}
				}
				if err := c.zero().Decode(append(body, 0)); !errors.Is(err, wire.StatusMalformedRequest) {
					rt.Fatalf("trailing byte: err %v", err)
				}
			})
		})
	}
}

// Through frames: a request goes out with AppendRequest and is read with
// ReadFrame and DecodeRequest; a reply with AppendReply and DecodeReply.
func TestMessageFrameRoundTrip(t *testing.T) {
	for _, c := range messageCases() {
		t.Run(c.name, func(t *testing.T) {
			isReply := strings.HasSuffix(c.name, "Reply")
			rapid.Check(t, func(rt *rapid.T) {
				m := c.gen.Draw(rt, "message")
				id := rapid.Uint32().Draw(rt, "id")
				var stream []byte
				var err error
				if isReply {
					stream, err = wire.AppendReply(nil, id, m)
				} else {
					stream, err = wire.AppendRequest(nil, id, m)
				}
				if err != nil {
					rt.Fatalf("append: %v", err)
				}
				f, err := wire.ReadFrame(bytes.NewReader(stream), nil, wire.DefaultMaxFrameSize)
				if err != nil {
					rt.Fatalf("read frame: %v", err)
				}
				if f.ID != id || f.Kind != m.Kind() || f.Version != wire.ProtocolVersion || f.IsReply() != isReply {
					rt.Fatalf("header %+v", f.FrameHeader)
				}
				got := c.zero()
				if isReply {
					err = wire.DecodeReply(f, got)
				} else {
					err = wire.DecodeRequest(f, got)
				}
				if err != nil {
					rt.Fatalf("decode: %v", err)
				}
				if !reflect.DeepEqual(got, m) {
					rt.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
				}
			})
		})
	}
}

func TestEveryDefinedKindHasMessages(t *testing.T) {
	seen := map[wire.Kind]int{}
	for _, c := range messageCases() {
		seen[c.zero().Kind()]++
	}
	for k := wire.Kind(0); k < 0x100; k++ {
		switch {
		case k.Defined() && seen[k] != 2:
			t.Errorf("%s: %d message types, want a request and a reply", k, seen[k])
		case !k.Defined() && seen[k] != 0:
			t.Errorf("%s is not defined but has messages", k)
		case k.Defined() && k.Reserved():
			t.Errorf("%s is both defined and reserved", k)
		}
	}
}

func TestEncodeRefusesWhatCannotDecode(t *testing.T) {
	long := strings.Repeat("x", wire.MaxNameLen+1)
	cases := []struct {
		name string
		m    wire.Message
		want wire.Status
	}{
		{"long topic", &wire.ProduceRequest{Topic: long}, wire.StatusInvalidArgument},
		{"invalid UTF-8 name", &wire.DescribeTopicRequest{Name: "\xff"}, wire.StatusInvalidArgument},
		{"long token", &wire.CommitRequest{Offsets: []wire.CommitOffset{{Token: make([]byte, wire.MaxFenceTokenLen+1)}}},
			wire.StatusMessageTooLarge},
		{"unknown durability", &wire.CreateTopicRequest{Config: wire.TopicConfig{Durability: 9}}, wire.StatusInvalidArgument},
		{"unknown compression", &wire.CreateTopicRequest{Config: wire.TopicConfig{Compression: 7}}, wire.StatusInvalidArgument},
		{"negative duration", &wire.PollRequest{MaxWait: -1}, wire.StatusInvalidArgument},
		{"no position mode", &wire.PollRequest{Partitions: []wire.PollPartition{{}}}, wire.StatusInvalidArgument},
		{"unused position value", &wire.PollRequest{Partitions: []wire.PollPartition{
			{Position: wire.Position{Mode: wire.PositionFirst, Offset: 3}}}}, wire.StatusInvalidArgument},
		{"bad reset", &wire.ResetPositionRequest{Partitions: []wire.ResetPartition{
			{Position: wire.Position{Mode: wire.PositionFirst, Reset: wire.PositionNext}}}}, wire.StatusInvalidArgument},
		{"unknown scope", &wire.CreateTokenRequest{Scopes: 0x80}, wire.StatusInvalidArgument},
		{"too many filter params", &wire.PollRequest{Filter: wire.Filter{Params: make([]wire.FilterParam, wire.MaxFilterParams+1)}},
			wire.StatusInvalidArgument},
		{"offset without has-offset", &wire.GetCommittedReply{Partitions: []wire.Committed{{Offset: 1}}}, wire.StatusInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := c.m.Encode(dst)
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
			if _, err := wire.AppendRequest(nil, 1, c.m); !errors.Is(err, c.want) {
				t.Fatalf("AppendRequest: err %v, want %v", err, c.want)
			}
		})
	}
}

// Reply messages are cut rather than refused, so an error always gets out.
func TestLongMessagesAreCut(t *testing.T) {
	m := &wire.PollReply{Partitions: []wire.PollPartitionReply{{Message: strings.Repeat("é", wire.MaxTextLen)}}}
	body, err := m.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got wire.PollReply
	if err := got.Decode(body); err != nil {
		t.Fatal(err)
	}
	msg := got.Partitions[0].Message
	if len(msg) > wire.MaxTextLen || !strings.HasPrefix(m.Partitions[0].Message, msg) || len(msg) < wire.MaxTextLen-1 {
		t.Fatalf("message of %d bytes", len(msg))
	}
}

func TestPollReplyBatchParts(t *testing.T) {
	m := &wire.PollReply{Partitions: []wire.PollPartitionReply{{
		Batches:    []byte("ab"),
		BatchParts: [][]byte{[]byte("cd"), nil, []byte("e")},
	}}}
	body, err := m.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got wire.PollReply
	if err := got.Decode(body); err != nil {
		t.Fatal(err)
	}
	if p := got.Partitions[0]; string(p.Batches) != "abcde" || len(p.BatchParts) != 0 {
		t.Fatalf("batches %q, parts %q", p.Batches, p.BatchParts)
	}
}

// Decoded byte fields alias the body and are capped, so appending to one
// cannot overwrite the next field.
func TestDecodedBytesAliasBody(t *testing.T) {
	m := &wire.ProduceRequest{Topic: "t", Partition: 1, Batch: []byte("batch")}
	body, _ := m.Encode(nil)
	body = append(body, "tail"...)[:len(body)]
	var got wire.ProduceRequest
	if err := got.Decode(body); err != nil {
		t.Fatal(err)
	}
	if &got.Batch[0] != &body[len(body)-len("batch")] {
		t.Fatal("batch was copied")
	}
	if cap(got.Batch) != len(got.Batch) {
		t.Fatalf("batch cap %d, len %d", cap(got.Batch), len(got.Batch))
	}
}

// optionalLastField reports a message whose encoding may end before an
// optional last field.
func optionalLastField(m wire.Message) bool {
	switch m.(type) {
	case *wire.DescribeTopicRequest, *wire.DescribeTopicReply, *wire.DescribeGroupRequest, *wire.AuthenticateRequest:
		return true
	}
	return false
}
