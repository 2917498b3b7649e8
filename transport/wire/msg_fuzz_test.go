package wire_test

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// Fuzz targets, one per decoder. Each checks that arbitrary bytes never
// panic a decoder nor make it allocate more than a small multiple of the
// input, that every rejection is StatusMalformedRequest, and that every
// accepted input is canonical: it re-encodes to the same bytes. The seed
// corpus is valid encodings drawn from the round-trip generators, so the
// default `go test` runs each target over them.
//
//	go test ./transport/wire/ -run '^$' -fuzz '^FuzzDecodePollReply$' -fuzztime 30s

// allocBound is what decoding n bytes may allocate: decoded structs are a
// few times larger than their smallest encoding, strings round up to size
// classes, and an error message costs a little.
func allocBound(n int) uint64 { return 8*uint64(n) + 8<<10 }

func bytesAllocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// leastBytesAllocated is bytesAllocated of the cheapest of three runs of
// fn, which must do the same work each time. TotalAlloc counts the whole
// process, so whatever else allocates meanwhile (the runtime, the race
// detector) may inflate one measurement; it is unlikely to inflate all
// three.
func leastBytesAllocated(fn func()) uint64 {
	least := bytesAllocated(fn)
	for range 2 {
		least = min(least, bytesAllocated(fn))
	}
	return least
}

func messageCaseNamed(tb testing.TB, name string) messageCase {
	for _, c := range messageCases() {
		if c.name == name {
			return c
		}
	}
	tb.Fatalf("no message case %q", name)
	return messageCase{}
}

func fuzzDecoder(f *testing.F, name string) {
	c := messageCaseNamed(f, name)
	f.Add([]byte{})
	for seed := range 8 {
		body, err := c.gen.Example(seed).Encode(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
		if len(body) > 0 {
			f.Add(body[:len(body)-1])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := c.zero()
		var err error
		if n := bytesAllocated(func() { err = m.Decode(b) }); n > allocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d", len(b), n)
		}
		if err != nil {
			if !errors.Is(err, wire.StatusMalformedRequest) {
				t.Fatalf("rejection is not malformed-request: %v", err)
			}
			return
		}
		out, err := m.Encode(nil)
		if err != nil {
			t.Fatalf("accepted input does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("accepted input is not canonical:\n in % x\nout % x", b, out)
		}
	})
}

func FuzzDecodeAuthenticateRequest(f *testing.F)  { fuzzDecoder(f, "AuthenticateRequest") }
func FuzzDecodeAuthenticateReply(f *testing.F)    { fuzzDecoder(f, "AuthenticateReply") }
func FuzzDecodeCreateTopicRequest(f *testing.F)   { fuzzDecoder(f, "CreateTopicRequest") }
func FuzzDecodeCreateTopicReply(f *testing.F)     { fuzzDecoder(f, "CreateTopicReply") }
func FuzzDecodeDeleteTopicRequest(f *testing.F)   { fuzzDecoder(f, "DeleteTopicRequest") }
func FuzzDecodeDeleteTopicReply(f *testing.F)     { fuzzDecoder(f, "DeleteTopicReply") }
func FuzzDecodeListTopicsRequest(f *testing.F)    { fuzzDecoder(f, "ListTopicsRequest") }
func FuzzDecodeListTopicsReply(f *testing.F)      { fuzzDecoder(f, "ListTopicsReply") }
func FuzzDecodeDescribeTopicRequest(f *testing.F) { fuzzDecoder(f, "DescribeTopicRequest") }
func FuzzDecodeDescribeTopicReply(f *testing.F)   { fuzzDecoder(f, "DescribeTopicReply") }
func FuzzDecodePurgeRequest(f *testing.F)         { fuzzDecoder(f, "PurgeRequest") }
func FuzzDecodePurgeReply(f *testing.F)           { fuzzDecoder(f, "PurgeReply") }
func FuzzDecodeGetPartitionStateRequest(f *testing.F) {
	fuzzDecoder(f, "GetPartitionStateRequest")
}
func FuzzDecodeGetPartitionStateReply(f *testing.F) { fuzzDecoder(f, "GetPartitionStateReply") }
func FuzzDecodeInitProducerRequest(f *testing.F)    { fuzzDecoder(f, "InitProducerRequest") }
func FuzzDecodeInitProducerReply(f *testing.F)      { fuzzDecoder(f, "InitProducerReply") }
func FuzzDecodeProduceRequest(f *testing.F)         { fuzzDecoder(f, "ProduceRequest") }
func FuzzDecodeProduceReply(f *testing.F)           { fuzzDecoder(f, "ProduceReply") }
func FuzzDecodeAttachConsumerRequest(f *testing.F)  { fuzzDecoder(f, "AttachConsumerRequest") }
func FuzzDecodeAttachConsumerReply(f *testing.F)    { fuzzDecoder(f, "AttachConsumerReply") }
func FuzzDecodePollRequest(f *testing.F)            { fuzzDecoder(f, "PollRequest") }
func FuzzDecodePollReply(f *testing.F)              { fuzzDecoder(f, "PollReply") }
func FuzzDecodeCommitRequest(f *testing.F)          { fuzzDecoder(f, "CommitRequest") }
func FuzzDecodeCommitReply(f *testing.F)            { fuzzDecoder(f, "CommitReply") }
func FuzzDecodeResetPositionRequest(f *testing.F)   { fuzzDecoder(f, "ResetPositionRequest") }
func FuzzDecodeResetPositionReply(f *testing.F)     { fuzzDecoder(f, "ResetPositionReply") }
func FuzzDecodeGetCommittedRequest(f *testing.F)    { fuzzDecoder(f, "GetCommittedRequest") }
func FuzzDecodeGetCommittedReply(f *testing.F)      { fuzzDecoder(f, "GetCommittedReply") }
func FuzzDecodeCreateTokenRequest(f *testing.F)     { fuzzDecoder(f, "CreateTokenRequest") }
func FuzzDecodeCreateTokenReply(f *testing.F)       { fuzzDecoder(f, "CreateTokenReply") }
func FuzzDecodeListTokensRequest(f *testing.F)      { fuzzDecoder(f, "ListTokensRequest") }
func FuzzDecodeListTokensReply(f *testing.F)        { fuzzDecoder(f, "ListTokensReply") }
func FuzzDecodeRevokeTokenRequest(f *testing.F)     { fuzzDecoder(f, "RevokeTokenRequest") }
func FuzzDecodeRevokeTokenReply(f *testing.F)       { fuzzDecoder(f, "RevokeTokenReply") }

// FuzzServeStream plays a node's read loop over an arbitrary byte stream:
// read frames under a limit, answer what cannot be served with an error
// reply, decode the rest (requests and replies alike). Nothing panics, a
// too-large frame allocates nothing for its body, and memory stays within
// the frame limit plus what the decoders may allocate.
func FuzzServeStream(f *testing.F) {
	const limit = 4 << 10
	var stream []byte
	for _, c := range messageCases() {
		m := c.gen.Example(0)
		var err error
		if m.Kind() == wire.KindPoll {
			stream, err = wire.AppendReply(stream, 1, m)
		} else {
			stream, err = wire.AppendRequest(stream, 1, m)
		}
		if err != nil {
			f.Fatal(err)
		}
		f.Add(stream[len(stream)-min(len(stream), 64):])
	}
	f.Add(stream)
	f.Add(wire.AppendErrorReply(nil, wire.FrameHeader{Kind: wire.KindPoll, ID: 9}, wire.StatusBusy, "busy"))

	requests := map[wire.Kind]func() wire.Message{}
	replies := map[wire.Kind]func() wire.Message{}
	for _, c := range messageCases() {
		if k := c.zero().Kind(); len(c.name) > 5 && c.name[len(c.name)-5:] == "Reply" {
			replies[k] = c.zero
		} else {
			requests[k] = c.zero
		}
	}

	f.Fuzz(func(t *testing.T, b []byte) {
		serve := func() {
			r := bytes.NewReader(b)
			var buf, out []byte
			for {
				fr, err := wire.ReadFrame(r, buf, limit)
				var tooLarge *wire.FrameTooLargeError
				switch {
				case errors.As(err, &tooLarge):
					out = wire.AppendErrorReply(out[:0], tooLarge.Header, wire.StatusMessageTooLarge, err.Error())
					if _, err := io.CopyN(io.Discard, r, int64(tooLarge.Size-wire.FrameHeaderSize)); err != nil {
						return
					}
					continue
				case err != nil:
					return
				}
				buf = fr.Body[:0]
				if fr.IsReply() {
					if newReply, ok := replies[fr.Kind]; ok {
						_ = wire.DecodeReply(fr, newReply())
					}
					continue
				}
				if err := wire.CheckRequest(fr.FrameHeader); err != nil {
					out = wire.AppendErrorReply(out[:0], fr.FrameHeader, wire.StatusOf(err), err.Error())
					continue
				}
				if err := wire.DecodeRequest(fr, requests[fr.Kind]()); err != nil {
					out = wire.AppendErrorReply(out[:0], fr.FrameHeader, wire.StatusOf(err), err.Error())
				}
			}
		}
		if n := leastBytesAllocated(serve); n > 2*limit+allocBound(len(b)) {
			t.Fatalf("serving %d bytes allocated %d", len(b), n)
		}
	})
}
