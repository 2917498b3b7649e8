package quicceiling

import (
	"context"
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Measure(ctx, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.MessageSize != MessageSize || c.Bytes < MessageSize || c.BytesPerSec <= 0 || c.MessagesPerSec <= 0 {
		t.Errorf("ceiling %+v", c)
	}
	if c.Bytes%MessageSize != 0 {
		t.Errorf("the server read %d bytes, not whole messages", c.Bytes)
	}
}

// BenchmarkRawCeiling is the transport's ceiling: one raw quic-go stream on
// loopback, 1 KiB writes through a 64 KiB bufio.Writer.
func BenchmarkRawCeiling(b *testing.B) {
	b.SetBytes(MessageSize)
	c, err := runRawStream(context.Background(), MessageSize, func(i int) bool { return i >= b.N })
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(c.MessagesPerSec, "msgs/s")
	b.ReportMetric(c.BytesPerSec/1e6, "MB/s(server)")
}
