package quic

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestMeasureRawCeiling(t *testing.T) {
	c, err := MeasureRawCeiling(testContext(t), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.MessageSize != CeilingMessageSize || c.Bytes < CeilingMessageSize || c.BytesPerSec <= 0 || c.MessagesPerSec <= 0 {
		t.Errorf("ceiling %+v", c)
	}
	if c.Bytes%CeilingMessageSize != 0 {
		t.Errorf("the server read %d bytes, not whole messages", c.Bytes)
	}
}

// BenchmarkRawCeiling is the transport's ceiling: one raw quic-go stream on
// loopback, 1 KiB writes through a 64 KiB bufio.Writer.
func BenchmarkRawCeiling(b *testing.B) {
	b.SetBytes(CeilingMessageSize)
	c, err := runRawStream(context.Background(), CeilingMessageSize, func(i int) bool { return i >= b.N })
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(c.MessagesPerSec, "msgs/s")
	b.ReportMetric(c.BytesPerSec/1e6, "MB/s(server)")
}

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
	msg := frame(strings.Repeat("m", CeilingMessageSize-headerLen))
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
