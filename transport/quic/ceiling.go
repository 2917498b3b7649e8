package quic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/ledgemq/ledge/transport/quic/certs"
)

// CeilingMessageSize is the write size of [MeasureRawCeiling].
const CeilingMessageSize = 1024

// Ceiling is what one raw QUIC stream moved on loopback.
type Ceiling struct {
	MessageSize    int           // bytes per write
	Bytes          int64         // bytes the server read
	Elapsed        time.Duration // from the first write to the server reading the end
	BytesPerSec    float64
	MessagesPerSec float64 // BytesPerSec / MessageSize
}

func (c Ceiling) String() string {
	return fmt.Sprintf("%.1f MB/s, %.0f msgs/s of %d B (%d bytes in %v)",
		c.BytesPerSec/1e6, c.MessagesPerSec, c.MessageSize, c.Bytes, c.Elapsed.Round(time.Millisecond))
}

// MeasureRawCeiling measures the throughput ceiling of the transport on
// this machine: one quic-go connection on 127.0.0.1 with this package's
// default windows and sockets (ListenUDP) at both ends, one stream, 1 KiB
// writes through a 64 KiB bufio.Writer for duration d, the server reading
// into a 64 KiB buffer and discarding.
// No framing, no budget, no node: other benchmarks are compared with it.
func MeasureRawCeiling(ctx context.Context, d time.Duration) (Ceiling, error) {
	start := time.Now()
	return runRawStream(ctx, CeilingMessageSize, func(i int) bool {
		// Reading the clock every 64 writes keeps it off the profile.
		return i&63 == 0 && (time.Since(start) >= d || ctx.Err() != nil)
	})
}

// runRawStream writes size-byte messages on one raw stream until done(i)
// reports true after the i-th write, and returns what the server read.
func runRawStream(ctx context.Context, size int, done func(i int) bool) (Ceiling, error) {
	if size <= 0 {
		return Ceiling{}, errors.New("quic: message size must be positive")
	}
	eph, err := certs.NewEphemeral("127.0.0.1")
	if err != nil {
		return Ceiling{}, err
	}
	scfg, err := Config{}.withDefaults()
	if err != nil {
		return Ceiling{}, err
	}
	ccfg, err := ClientConfig{}.withDefaults()
	if err != nil {
		return Ceiling{}, err
	}
	srvTLS := ServerTLSConfig(nil)
	srvTLS.Certificates = append(srvTLS.Certificates, eph.Server)
	loopback := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	ssock, err := ListenUDP(loopback)
	if err != nil {
		return Ceiling{}, fmt.Errorf("quic: ceiling listener: %w", err)
	}
	defer ssock.Close()
	ln, err := quicgo.Listen(ssock, srvTLS, scfg.quicConfig(nil))
	if err != nil {
		return Ceiling{}, fmt.Errorf("quic: ceiling listener: %w", err)
	}
	defer ln.Close()

	type result struct {
		n   int64
		end time.Time
		err error
	}
	res := make(chan result, 1)
	go func() {
		qc, err := ln.Accept(ctx)
		if err != nil {
			res <- result{err: err}
			return
		}
		qs, err := qc.AcceptStream(ctx)
		if err != nil {
			res <- result{err: err}
			return
		}
		n, err := io.CopyBuffer(io.Discard, qs, make([]byte, defaultStreamBufferSize))
		res <- result{n: n, end: time.Now(), err: err}
	}()

	csock, err := ListenUDP(loopback)
	if err != nil {
		return Ceiling{}, fmt.Errorf("quic: ceiling dial: %w", err)
	}
	defer csock.Close()
	qc, err := quicgo.Dial(ctx, csock, ln.Addr(), ClientTLSConfig(eph.CA.Pool(), ""), ccfg.quicConfig())
	if err != nil {
		return Ceiling{}, fmt.Errorf("quic: ceiling dial: %w", err)
	}
	defer qc.CloseWithError(0, "")
	qs, err := qc.OpenStreamSync(ctx)
	if err != nil {
		return Ceiling{}, err
	}
	bw := bufio.NewWriterSize(qs, defaultStreamBufferSize)
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i)
	}
	start := time.Now()
	for i := 1; ; i++ {
		if _, err := bw.Write(msg); err != nil {
			return Ceiling{}, err
		}
		if done(i) {
			break
		}
	}
	if err := bw.Flush(); err != nil {
		return Ceiling{}, err
	}
	if err := qs.Close(); err != nil {
		return Ceiling{}, err
	}
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		return Ceiling{}, context.Cause(ctx)
	}
	if r.err != nil {
		return Ceiling{}, r.err
	}
	elapsed := r.end.Sub(start)
	c := Ceiling{MessageSize: size, Bytes: r.n, Elapsed: elapsed}
	if elapsed > 0 {
		c.BytesPerSec = float64(r.n) / elapsed.Seconds()
		c.MessagesPerSec = c.BytesPerSec / float64(size)
	}
	return c, nil
}
