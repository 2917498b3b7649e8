package sdk

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ledgemq/ledge/record"

	"github.com/ledgemq/ledge/transport/wire"
)

// ackNode answers every produce request at once, without looking at it:
// what is left is the producer's own cost per record.
type ackNode struct{ offset uint64 }

func (n *ackNode) initProducer(context.Context) (ident, error) { return ident{id: 1}, nil }
func (n *ackNode) requestTimeout() time.Duration               { return time.Minute }
func (n *ackNode) streamTimedOut(requestStream)                {}
func (n *ackNode) openStream(context.Context, int) (requestStream, int, error) {
	return &ackStream{n: n}, 64 << 20, nil
}

type ackStream struct{ n *ackNode }

func (s *ackStream) Send(_ context.Context, frame []byte, cb func([]byte, error)) error {
	h, _, _ := wire.ParseFrameHeader(frame, len(frame))
	body := frame[wire.FrameHeaderSize:]
	var req wire.ProduceRequest
	if err := req.Decode(body); err != nil {
		panic(err)
	}
	bh, _ := record.ParseBatchHeader(req.Batch)
	base := s.n.offset
	s.n.offset += uint64(bh.RecordCount)
	reply, _ := wire.AppendReply(nil, h.ID, &wire.ProduceReply{BaseOffset: base, LastOffset: s.n.offset - 1, AppendTime: wire.NoAppendTime})
	go cb(reply, nil)
	return nil
}

func (s *ackStream) Close(context.Context) error { return nil }

// ackProducer is a producer of a one-partition topic on an ackNode.
func ackProducer(b *testing.B) *Producer {
	b.Helper()
	info := TopicInfo{Name: "bench", Config: TopicConfig{Partitions: 1}}
	p, err := newProducer(context.Background(), &ackNode{}, slog.New(slog.DiscardHandler), info, nil)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkProduce measures the producer's cost per 1 KiB record: batching,
// encoding, callbacks.
func BenchmarkProduce(b *testing.B) {
	p := ackProducer(b)
	value := make([]byte, 1024)
	ctx := context.Background()
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		p.Produce(ctx, &Record{Value: value}, nil)
	}
	if err := p.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkProduceOneAtATime measures a producer that waits for each
// acknowledgement, against a node that answers at once: the producer's
// own latency per record (hand-offs between goroutines included).
func BenchmarkProduceOneAtATime(b *testing.B) {
	p := ackProducer(b)
	value := make([]byte, 1024)
	ctx := context.Background()
	done := make(chan error, 1)
	cb := func(_ *Record, err error) { done <- err }
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		p.Produce(ctx, &Record{Value: value}, cb)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		b.Fatal(err)
	}
}
