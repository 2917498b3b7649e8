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

func main() {
	proto := flag.String("proto", "tcp", "tcp, tls (TLS 1.3 over TCP) or quic")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	source := flag.Duration("source", 0, "QUIC only: send 1 KiB messages on each stream for this long instead of reading")
	ownSocket := flag.Bool("own-socket", false, "QUIC only: let quic-go open its own socket rather than the one a Ledge node reads through")
	flag.Parse()
	var err error
	switch *proto {
	case "tcp", "tls":
		err = serveTCP(*listen, *proto == "tls")
	case "quic":
		err = serveQUIC(*listen, *source, *ownSocket)
	default:
		err = fmt.Errorf("--proto: %q is none of tcp, tls and quic", *proto)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawsink:", err)
		os.Exit(1)
	}
}

// serveTCP serves raw TCP, or TLS 1.3 over TCP with withTLS.
func serveTCP(addr string, withTLS bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if withTLS {
		conf, err := serverTLS(addr)
		if err != nil {
			return err
		}
		ln = tls.NewListener(ln, conf)
	}
	fmt.Printf("rawsink listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			if tc, ok := c.(*tls.Conn); ok {
				if err := tc.Handshake(); err != nil {
					return
				}
				if tc.ConnectionState().NegotiatedProtocol == ceiling.RoundTripALPN {
					_ = ceiling.Answer(tc)
					return
				}
			}
			_, _ = io.CopyBuffer(io.Discard, c, make([]byte, readBuf))
		}()
	}
}

// serverTLS is a TLS 1.3 configuration with a throwaway certificate for
// the host of addr, speaking the raw stream's protocol and the round
// trip's.
func serverTLS(addr string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	eph, err := certs.NewEphemeral(host)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{eph.Server},
		NextProtos: []string{ceiling.ALPN, ceiling.RoundTripALPN}}, nil
}

// readBuf is what the sink reads at a time: the stream buffer of
// transport/quic, which its in-process ceiling reads with.
const readBuf = 64 << 10

func serveQUIC(addr string, source time.Duration, ownSocket bool) error {
	tlsConf, err := serverTLS(addr)
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
			switch {
			case c.ConnectionState().TLS.NegotiatedProtocol == ceiling.RoundTripALPN:
				if ceiling.Answer(s) == nil {
					_ = s.Close()
				}
				return
			case source > 0:
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
