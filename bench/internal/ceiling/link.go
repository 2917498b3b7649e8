package ceiling

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	quicgo "github.com/quic-go/quic-go"

	lquic "github.com/ledgemq/ledge/transport/quic"
)

// ALPN is the protocol of the raw QUIC streams cmd/rawsink discards or
// sends (RoundTripALPN asks it for the round trip instead).
const ALPN = "ledge-bench-raw"

// Stream measures one raw stream to a rawsink at addr: 1 KiB writes for
// d, then the time until the sink has read everything (it closes its side
// at the end of the stream). proto is "tcp" or "quic"; QUIC uses a Ledge
// client's windows and no certificate check (the sink's is throwaway).
// TCP dials with control (nil: none), which may set socket options such
// as the congestion control.
func Stream(ctx context.Context, proto, addr string, d time.Duration, control func(network, address string, c syscall.RawConn) error) (bytesPerSec float64, err error) {
	var w io.WriteCloser
	var wait func() error
	switch proto {
	case "tcp":
		c, err := (&net.Dialer{Control: control}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		tc := c.(*net.TCPConn)
		w = closeWriter{tc}
		wait = func() error { _, err := io.Copy(io.Discard, tc); return err }
	case "quic":
		c, s, err := dialRaw(ctx, addr, false, ALPN)
		if err != nil {
			return 0, err
		}
		defer c.CloseWithError(0, "")
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

// dialRaw dials a rawsink's QUIC listener with a Ledge client's windows
// and socket (quic-go's own with ownSocket), protocol alpn and no
// certificate check (the sink's is throwaway), and opens a stream. The
// socket is closed with the connection.
func dialRaw(ctx context.Context, addr string, ownSocket bool, alpn string) (*quicgo.Conn, *quicgo.Stream, error) {
	cfg := &quicgo.Config{
		InitialStreamReceiveWindow:     lquic.DefaultClientInitialStreamWindow,
		MaxStreamReceiveWindow:         lquic.DefaultClientMaxStreamWindow,
		InitialConnectionReceiveWindow: lquic.DefaultClientInitialConnectionWindow,
		MaxConnectionReceiveWindow:     lquic.DefaultClientMaxConnectionWindow,
	}
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}, MinVersion: tls.VersionTLS13}
	if ownSocket {
		c, err := quicgo.DialAddr(ctx, addr, tlsConf, cfg)
		if err != nil {
			return nil, nil, err
		}
		return openRaw(ctx, c)
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, nil, err
	}
	sock, err := lquic.ListenUDP(&net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		return nil, nil, err
	}
	c, err := quicgo.Dial(ctx, sock, raddr, tlsConf, cfg)
	if err != nil {
		sock.Close()
		return nil, nil, err
	}
	context.AfterFunc(c.Context(), func() { sock.Close() })
	return openRaw(ctx, c)
}

func openRaw(ctx context.Context, c *quicgo.Conn) (*quicgo.Conn, *quicgo.Stream, error) {
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		c.CloseWithError(0, "")
		return nil, nil, err
	}
	return c, s, nil
}

// QUICTo measures the raw QUIC ceiling towards a rawsink at addr (the
// direction of a produce): 1 KiB messages written through a 64 KiB buffer
// for d, as transport/quic's in-process ceiling writes them, timed until
// the sink has read them all.
func QUICTo(ctx context.Context, addr string, d time.Duration, ownSocket bool) (bytesPerSec float64, err error) {
	c, s, err := dialRaw(ctx, addr, ownSocket, ALPN)
	if err != nil {
		return 0, err
	}
	defer c.CloseWithError(0, "")
	start := time.Now()
	n, err := WriteMessages(ctx, s, d)
	if err != nil {
		return 0, err
	}
	if err := s.Close(); err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, s); err != nil { // the sink closes once it read everything
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// QUICFrom measures the raw QUIC ceiling from a rawsink --source at addr
// (the direction of a replay): it asks for the stream and reads it to
// its end in 64 KiB reads.
func QUICFrom(ctx context.Context, addr string, ownSocket bool) (bytesPerSec float64, err error) {
	c, s, err := dialRaw(ctx, addr, ownSocket, ALPN)
	if err != nil {
		return 0, err
	}
	defer c.CloseWithError(0, "")
	stop := context.AfterFunc(ctx, func() { s.CancelRead(0) })
	defer stop()
	if _, err := s.Write([]byte{1}); err != nil {
		return 0, err
	}
	start := time.Now()
	n, err := io.CopyBuffer(io.Discard, s, make([]byte, 64<<10))
	if err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// WriteMessages writes 1 KiB messages to w through a 64 KiB buffer for d
// (or until ctx ends), as transport/quic's in-process ceiling writes them,
// flushes, and returns the bytes written. Both ends of the placed ceiling
// send with it (QUICTo here, rawsink --source there).
func WriteMessages(ctx context.Context, w io.Writer, d time.Duration) (int64, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	msg := make([]byte, 1024)
	for i := range msg {
		msg[i] = byte(i)
	}
	start := time.Now()
	var n int64
	for i := 0; ; i++ {
		if _, err := bw.Write(msg); err != nil {
			return n, err
		}
		n += int64(len(msg))
		// Reading the clock every 64 writes keeps it off the profile.
		if i&63 == 0 && (time.Since(start) >= d || ctx.Err() != nil) {
			break
		}
	}
	return n, bw.Flush()
}
