package quicceiling

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/quic/certs"
)

// MessageSize is the write size of [Measure].
const MessageSize = 1024

// streamBufferSize is the size of a transport/quic stream's read and
// write buffers, and so of the raw stream's.
const streamBufferSize = 64 << 10

// Result is what one raw QUIC stream moved on loopback.
type Result struct {
	MessageSize    int           // bytes per write
	Bytes          int64         // bytes the server read
	Elapsed        time.Duration // from the first write to the server reading the end
	BytesPerSec    float64
	MessagesPerSec float64 // BytesPerSec / MessageSize
}

func (c Result) String() string {
	return fmt.Sprintf("%.1f MB/s, %.0f msgs/s of %d B (%d bytes in %v)",
		c.BytesPerSec/1e6, c.MessagesPerSec, c.MessageSize, c.Bytes, c.Elapsed.Round(time.Millisecond))
}

// Measure measures the throughput ceiling of the transport on this
// machine: one quic-go connection on 127.0.0.1 with transport/quic's
// default windows and sockets (quic.ListenUDP) at both ends, one stream,
// 1 KiB writes through a 64 KiB bufio.Writer for duration d, the server
// reading into a 64 KiB buffer and discarding.
// No framing, no budget, no node: other benchmarks are compared with it.
func Measure(ctx context.Context, d time.Duration) (Result, error) {
	start := time.Now()
	return runRawStream(ctx, MessageSize, func(i int) bool {
		// Reading the clock every 64 writes keeps it off the profile.
		return i&63 == 0 && (time.Since(start) >= d || ctx.Err() != nil)
	})
}

// serverConfig is the quic-go configuration of a transport/quic listener
// with the default Config, less its admission control (a window budget
// shared by the connections).
func serverConfig() *quicgo.Config {
	return &quicgo.Config{
		HandshakeIdleTimeout:             quic.DefaultHandshakeTimeout / 2,
		MaxIdleTimeout:                   quic.DefaultMaxIdleTimeout,
		InitialStreamReceiveWindow:       quic.DefaultServerInitialStreamWindow,
		MaxStreamReceiveWindow:           quic.DefaultServerMaxStreamWindow,
		InitialConnectionReceiveWindow:   quic.DefaultServerInitialConnectionWindow,
		MaxConnectionReceiveWindow:       quic.DefaultServerMaxConnectionWindow,
		MaxIncomingStreams:               quic.DefaultMaxIncomingStreams,
		MaxIncomingUniStreams:            -1,
		EnableStreamResetPartialDelivery: true,
	}
}

// clientConfig is the quic-go configuration of transport/quic's Dial with
// the default ClientConfig.
func clientConfig() *quicgo.Config {
	return &quicgo.Config{
		HandshakeIdleTimeout:             quic.DefaultHandshakeTimeout / 2,
		MaxIdleTimeout:                   quic.DefaultMaxIdleTimeout,
		KeepAlivePeriod:                  quic.DefaultClientKeepAlivePeriod,
		InitialStreamReceiveWindow:       quic.DefaultClientInitialStreamWindow,
		MaxStreamReceiveWindow:           quic.DefaultClientMaxStreamWindow,
		InitialConnectionReceiveWindow:   quic.DefaultClientInitialConnectionWindow,
		MaxConnectionReceiveWindow:       quic.DefaultClientMaxConnectionWindow,
		MaxIncomingStreams:               -1,
		MaxIncomingUniStreams:            -1,
		EnableStreamResetPartialDelivery: true,
	}
}

// runRawStream writes size-byte messages on one raw stream until done(i)
// reports true after the i-th write, and returns what the server read.
func runRawStream(ctx context.Context, size int, done func(i int) bool) (Result, error) {
	if size <= 0 {
		return Result{}, errors.New("quicceiling: message size must be positive")
	}
	eph, err := certs.NewEphemeral("127.0.0.1")
	if err != nil {
		return Result{}, err
	}
	srvTLS := quic.ServerTLSConfig(nil)
	srvTLS.Certificates = append(srvTLS.Certificates, eph.Server)
	loopback := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	ssock, err := quic.ListenUDP(loopback)
	if err != nil {
		return Result{}, fmt.Errorf("quicceiling:  listener: %w", err)
	}
	defer ssock.Close()
	ln, err := quicgo.Listen(ssock, srvTLS, serverConfig())
	if err != nil {
		return Result{}, fmt.Errorf("quicceiling:  listener: %w", err)
	}
	defer ln.Close()

	res := make(chan sinkResult, 1)
	go func() { res <- sink(ctx, ln) }()

	csock, err := quic.ListenUDP(loopback)
	if err != nil {
		return Result{}, fmt.Errorf("quicceiling:  dial: %w", err)
	}
	defer csock.Close()
	qc, err := quicgo.Dial(ctx, csock, ln.Addr(), quic.ClientTLSConfig(eph.CA.Pool(), ""), clientConfig())
	if err != nil {
		return Result{}, fmt.Errorf("quicceiling:  dial: %w", err)
	}
	defer qc.CloseWithError(0, "")
	qs, err := qc.OpenStreamSync(ctx)
	if err != nil {
		return Result{}, err
	}
	bw := bufio.NewWriterSize(qs, streamBufferSize)
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i)
	}
	start := time.Now()
	for i := 1; ; i++ {
		if _, err := bw.Write(msg); err != nil {
			return Result{}, err
		}
		if done(i) {
			break
		}
	}
	if err := bw.Flush(); err != nil {
		return Result{}, err
	}
	if err := qs.Close(); err != nil {
		return Result{}, err
	}
	var r sinkResult
	select {
	case r = <-res:
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
	if r.err != nil {
		return Result{}, r.err
	}
	elapsed := r.end.Sub(start)
	c := Result{MessageSize: size, Bytes: r.n, Elapsed: elapsed}
	if elapsed > 0 {
		c.BytesPerSec = float64(r.n) / elapsed.Seconds()
		c.MessagesPerSec = c.BytesPerSec / float64(size)
	}
	return c, nil
}

// sinkResult is what the server end of the raw stream read, and when it
// read the end.
type sinkResult struct {
	n   int64
	end time.Time
	err error
}

// sink is the server end: it accepts one connection and one stream and
// reads the stream to its end, discarding.
func sink(ctx context.Context, ln *quicgo.Listener) sinkResult {
	qc, err := ln.Accept(ctx)
	if err != nil {
		return sinkResult{err: err}
	}
	qs, err := qc.AcceptStream(ctx)
	if err != nil {
		return sinkResult{err: err}
	}
	n, err := io.CopyBuffer(io.Discard, qs, make([]byte, streamBufferSize))
	return sinkResult{n: n, end: time.Now(), err: err}
}
