package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// The hot paths — a producer's stream of produce frames and a consumer's
// stream of poll replies — encode and decode without allocating once their
// buffers and messages are reused.

func benchBatch(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// produceStream encodes produce requests into a reused buffer, and a node
// reads and decodes them into a reused request.
type produceStream struct {
	req   wire.ProduceRequest
	got   wire.ProduceRequest
	out   []byte
	frame []byte
	buf   []byte
	r     bytes.Reader
}

func newProduceStream(batchSize int) *produceStream {
	s := &produceStream{req: wire.ProduceRequest{Topic: "sensors", Partition: 3, Batch: benchBatch(batchSize)}}
	s.frame, _ = wire.AppendRequest(nil, 1, &s.req)
	return s
}

func (s *produceStream) encode() error {
	var err error
	s.out, err = wire.AppendRequest(s.out[:0], 1, &s.req)
	return err
}

func (s *produceStream) decode() error {
	s.r.Reset(s.frame)
	f, err := wire.ReadFrame(&s.r, s.buf, wire.DefaultMaxFrameSize)
	if err != nil {
		return err
	}
	s.buf = f.Body[:0]
	return wire.DecodeRequest(f, &s.got)
}

// pollStream encodes a poll reply from a node's read result (whole stored
// batches, handed over without joining them) and a client decodes it.
type pollStream struct {
	reply wire.PollReply
	got   wire.PollReply
	out   []byte
	frame []byte
	buf   []byte
	r     bytes.Reader
}

func newPollStream(partitions, batches, batchSize int) *pollStream {
	s := &pollStream{}
	token := make([]byte, 88)
	for p := range partitions {
		parts := make([][]byte, batches)
		for i := range parts {
			parts[i] = benchBatch(batchSize)
		}
		s.reply.Partitions = append(s.reply.Partitions, wire.PollPartitionReply{
			TopicID: [16]byte{1}, History: 1, StartOffset: 0, HighWatermark: 1 << 20,
			Next: uint64(p * batches * 100), Token: token, BatchParts: parts,
		})
	}
	s.frame, _ = wire.AppendReply(nil, 1, &s.reply)
	return s
}

func (s *pollStream) encode() error {
	var err error
	s.out, err = wire.AppendReply(s.out[:0], 1, &s.reply)
	return err
}

func (s *pollStream) decode() error {
	s.r.Reset(s.frame)
	f, err := wire.ReadFrame(&s.r, s.buf, wire.DefaultMaxFrameSize)
	if err != nil {
		return err
	}
	s.buf = f.Body[:0]
	return wire.DecodeReply(f, &s.got)
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	ps := newProduceStream(64 << 10)
	pl := newPollStream(4, 8, 16<<10)
	poll := &wire.PollRequest{
		Consumer:   wire.Consumer{Kind: wire.ConsumerNamed, Name: "billing", Session: 3},
		AutoCommit: wire.AutoCommitOnNextPoll,
		Partitions: []wire.PollPartition{{Topic: "sensors", Position: wire.Position{Mode: wire.PositionNext}}},
	}
	pollFrame, _ := wire.AppendRequest(nil, 1, poll)
	var pollGot wire.PollRequest
	var pollBuf []byte
	var pollReader bytes.Reader
	decodePoll := func() error {
		pollReader.Reset(pollFrame)
		f, err := wire.ReadFrame(&pollReader, pollBuf, 1<<20)
		if err != nil {
			return err
		}
		pollBuf = f.Body[:0]
		return wire.DecodeRequest(f, &pollGot)
	}
	for name, fn := range map[string]func() error{
		"produce request encode": ps.encode,
		"produce request decode": ps.decode,
		"poll reply encode":      pl.encode,
		"poll reply decode":      pl.decode,
		"poll request decode":    decodePoll,
	} {
		if err := fn(); err != nil { // warm up: buffers and messages grow once
			t.Fatalf("%s: %v", name, err)
		}
		if n := testing.AllocsPerRun(50, func() { _ = fn() }); n != 0 {
			t.Errorf("%s: %v allocations per frame", name, n)
		}
	}
	if !bytes.Equal(ps.got.Batch, ps.req.Batch) || len(pl.got.Partitions) != 4 || pollGot.Consumer.Name != "billing" {
		t.Fatal("decoded the wrong thing")
	}
}

// A count that the bytes left cannot hold is refused before anything is
// allocated for it.
func TestHugeCountsAllocateNothing(t *testing.T) {
	for _, c := range messageCases() {
		body, _ := c.gen.Example(0).Encode(nil)
		// Overwrite every aligned u32 in turn with the largest allowed
		// count; whatever field it lands in, decoding stays bounded.
		for off := 0; off+4 <= len(body); off++ {
			b := append([]byte(nil), body...)
			binary.LittleEndian.PutUint32(b[off:], wire.MaxListLen)
			var err error
			// The cheapest of three decodes, each into a new message:
			// TotalAlloc counts the whole process, and a one-off allocation
			// elsewhere must not pass for this decode's.
			decode := func() { err = c.zero().Decode(b) }
			if n := leastBytesAllocated(decode); n > allocBound(len(b)) {
				t.Errorf("%s, count at %d: allocated %d for %d bytes", c.name, off, n, len(b))
			}
			if err != nil && !errors.Is(err, wire.StatusMalformedRequest) {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	}
}

func BenchmarkProduceRequestEncode(b *testing.B) {
	s := newProduceStream(100 << 10)
	b.SetBytes(int64(len(s.frame)))
	if err := s.encode(); err != nil { // grow the buffers once, outside the measurement
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.encode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProduceRequestDecode(b *testing.B) {
	s := newProduceStream(100 << 10)
	b.SetBytes(int64(len(s.frame)))
	if err := s.decode(); err != nil { // grow the buffers once, outside the measurement
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.decode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPollReplyEncode(b *testing.B) {
	s := newPollStream(1, 10, 100<<10)
	b.SetBytes(int64(len(s.frame)))
	if err := s.encode(); err != nil { // grow the buffers once, outside the measurement
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.encode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPollReplyDecode(b *testing.B) {
	s := newPollStream(1, 10, 100<<10)
	b.SetBytes(int64(len(s.frame)))
	if err := s.decode(); err != nil { // grow the buffers once, outside the measurement
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.decode(); err != nil {
			b.Fatal(err)
		}
	}
}

// The per-frame cost without payload copies: an 8-partition poll reply of
// small batches, encoded and decoded.
func BenchmarkPollReplySmall(b *testing.B) {
	s := newPollStream(8, 1, 256)
	if err := s.encode(); err != nil { // grow the buffers once, outside the measurement
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.encode(); err != nil {
			b.Fatal(err)
		}
		if err := s.decode(); err != nil {
			b.Fatal(err)
		}
	}
}
