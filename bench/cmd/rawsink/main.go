package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/ledgemq/ledge/bench/internal/ceiling"
	lquic "github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/quic/certs"
)

// ALPN is the protocol both ends of the raw QUIC ceiling speak.
const ALPN = "ledge-bench-raw"

func main() {
	proto := flag.String("proto", "tcp", "tcp or quic")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	source := flag.Duration("source", 0, "QUIC only: send 1 KiB messages on each stream for this long instead of reading")
	ownSocket := flag.Bool("own-socket", false, "QUIC only: let quic-go open its own socket rather than the one a Ledge node reads through")
	flag.Parse()
	var err error
	switch *proto {
	case "tcp":
		err = serveTCP(*listen)
	case "quic":
		err = serveQUIC(*listen, *source, *ownSocket)
	default:
		err = fmt.Errorf("--proto: %q is neither tcp nor quic", *proto)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawsink:", err)
		os.Exit(1)
	}
}

func serveTCP(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("rawsink listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			_, _ = io.CopyBuffer(io.Discard, c, make([]byte, readBuf))
			c.Close()
		}()
	}
}

// readBuf is what the sink reads at a time: the stream buffer of
// transport/quic, which its in-process ceiling reads with.
const readBuf = 64 << 10

func serveQUIC(addr string, source time.Duration, ownSocket bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	eph, err := certs.NewEphemeral(host)
	if err != nil {
		return err
	}
	// The receive windows of a Ledge node (transport/quic defaults).
	cfg := &quicgo.Config{
		InitialStreamReceiveWindow:     lquic.DefaultServerInitialStreamWindow,
		MaxStreamReceiveWindow:         lquic.DefaultServerMaxStreamWindow,
		InitialConnectionReceiveWindow: lquic.DefaultServerInitialConnectionWindow,
		MaxConnectionReceiveWindow:     lquic.DefaultServerMaxConnectionWindow,
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{eph.Server}, NextProtos: []string{ALPN}}
	var ln *quicgo.Listener
	if ownSocket {
		ln, err = quicgo.ListenAddr(addr, tlsConf, cfg)
	} else {
		var udpAddr *net.UDPAddr
		if udpAddr, err = net.ResolveUDPAddr("udp", addr); err != nil {
			return err
		}
		var sock net.PacketConn
		if sock, err = lquic.ListenUDP(udpAddr); err != nil {
			return err
		}
		ln, err = quicgo.Listen(sock, tlsConf, cfg)
	}
	if err != nil {
		return err
	}
	fmt.Printf("rawsink listening on %s\n", ln.Addr())
	ctx := context.Background()
	for {
		c, err := ln.Accept(ctx)
		if err != nil {
			return err
		}
		go func() {
			s, err := c.AcceptStream(ctx)
			if err != nil {
				return
			}
			if source > 0 {
				send(s, source)
				return
			}
			_, _ = io.CopyBuffer(io.Discard, s, make([]byte, readBuf))
			s.Close()
		}()
	}
}

// send waits for the client's first byte, then writes 1 KiB messages on s
// for d and closes it.
func send(s *quicgo.Stream, d time.Duration) {
	var b [1]byte
	if _, err := io.ReadFull(s, b[:]); err != nil {
		s.CancelWrite(0)
		return
	}
	if _, err := ceiling.WriteMessages(context.Background(), s, d); err == nil {
		_ = s.Close()
	}
}
