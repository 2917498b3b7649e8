package ceiling

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	quicgo "github.com/quic-go/quic-go"

	lquic "github.com/ledgemq/ledge/transport/quic"
)

// rawALPN matches cmd/rawsink.
const rawALPN = "ledge-bench-raw"

// Stream measures one raw stream to a rawsink at addr: 1 KiB writes for
// d, then the time until the sink has read everything (it closes its side
// at the end of the stream). proto is "tcp" or "quic"; QUIC uses a Ledge
// client's windows and no certificate check (the sink's is throwaway).
func Stream(ctx context.Context, proto, addr string, d time.Duration) (bytesPerSec float64, err error) {
	var w io.WriteCloser
	var wait func() error
	switch proto {
	case "tcp":
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		tc := c.(*net.TCPConn)
		w = closeWriter{tc}
		wait = func() error { _, err := io.Copy(io.Discard, tc); return err }
	case "quic":
		cfg := &quicgo.Config{
			InitialStreamReceiveWindow:     lquic.DefaultClientInitialStreamWindow,
			MaxStreamReceiveWindow:         lquic.DefaultClientMaxStreamWindow,
			InitialConnectionReceiveWindow: lquic.DefaultClientInitialConnectionWindow,
			MaxConnectionReceiveWindow:     lquic.DefaultClientMaxConnectionWindow,
		}
		c, err := quicgo.DialAddr(ctx, addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{rawALPN}, MinVersion: tls.VersionTLS13}, cfg)
		if err != nil {
			return 0, err
		}
		defer c.CloseWithError(0, "")
		s, err := c.OpenStreamSync(ctx)
		if err != nil {
			return 0, err
		}
		w = s
		wait = func() error { _, err := io.Copy(io.Discard, s); return err }
	default:
		return 0, fmt.Errorf("ceiling: unknown protocol %q", proto)
	}
	buf := make([]byte, 1024)
	start := time.Now()
	var n int64
	for time.Since(start) < d && ctx.Err() == nil {
		m, err := w.Write(buf)
		n += int64(m)
		if err != nil {
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		if err != nil {
			return 0, err
		}
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

type closeWriter struct{ *net.TCPConn }

func (c closeWriter) Close() error { return c.CloseWrite() }
