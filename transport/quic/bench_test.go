package quic

import (
	"context"
	"strings"
	"testing"
	"time"
)

// BenchmarkPipelineEcho measures this package's own path: 1 KiB request
// frames pipelined 500 deep on one stream through the budget, the frame
// reader and in-order 7-byte replies, flushed one by one (Reply) or in
// bursts (WriteReply).
func BenchmarkPipelineEcho(b *testing.B) {
	ack := frame("ack")
	b.Run("Reply", func(b *testing.B) {
		benchmarkPipeline(b, func(s *Stream, r *Request) { _ = s.Reply(r, ack) })
	})
	b.Run("WriteReply", func(b *testing.B) {
		benchmarkPipeline(b, func(s *Stream, r *Request) { _ = s.WriteReply(r, ack) })
	})
}

func benchmarkPipeline(b *testing.B, h handler) {
	ts := newTestServer(b, Config{})
	ts.serve(b, h)
	c, err := Dial(context.Background(), ts.addr(), ts.clientTLS(), ClientConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := c.OpenStream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	p := NewPipeline(s, 500)
	msg := frame(strings.Repeat("m", 1024-headerLen)) // 1 KiB frames, as the raw ceiling writes
	done := make(chan struct{})
	b.SetBytes(int64(len(msg)))
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		last := i == b.N-1
		err := p.Send(context.Background(), msg, func(_ []byte, err error) {
			if err != nil {
				b.Error(err)
			}
			if last {
				close(done)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	_ = p.Close(context.Background())
}
