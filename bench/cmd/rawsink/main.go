// Command rawsink is the far end of the WAN ceilings: it accepts raw TCP
// connections or raw QUIC streams, reads and discards everything, and
// closes its side when the sender has finished, so the sender can time
// the delivery of all it wrote.
//
//	rawsink --proto tcp|quic --listen HOST:PORT
//
// It prints "rawsink listening on HOST:PORT" once it accepts.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	quicgo "github.com/quic-go/quic-go"

	lquic "github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/quic/certs"
)

// ALPN is the protocol both ends of the raw QUIC ceiling speak.
const ALPN = "ledge-bench-raw"

func main() {
	proto := flag.String("proto", "tcp", "tcp or quic")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	var err error
	switch *proto {
	case "tcp":
		err = serveTCP(*listen)
	case "quic":
		err = serveQUIC(*listen)
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
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}()
	}
}

func serveQUIC(addr string) error {
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
	ln, err := quicgo.ListenAddr(addr, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{eph.Server}, NextProtos: []string{ALPN}}, cfg)
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
			_, _ = io.Copy(io.Discard, s)
			s.Close()
		}()
	}
}
