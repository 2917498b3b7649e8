package quic_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/quic/certs"
	"github.com/ledgemq/ledge/transport/wire"
)

func newFrame(kind wire.Kind, flags wire.FrameFlags, body string) []byte {
	f, err := wire.AppendFrame(nil, wire.FrameHeader{Version: wire.ProtocolVersion, Flags: flags, Kind: kind}, []byte(body))
	if err != nil {
		log.Fatal(err)
	}
	return f
}

// A node's first start: TLS material in the data directory, a listener
// that authenticates each connection with its first frame and answers
// requests in order; a client that trusts the node's CA file.
func Example() {
	dataDir, err := os.MkdirTemp("", "ledge-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dataDir)
	store, err := certs.Open(certs.Options{Dir: filepath.Join(dataDir, "tls")})
	if err != nil {
		log.Fatal(err)
	}

	ln, err := quic.Listen("127.0.0.1:0", quic.ServerTLSConfig(store.GetCertificate), quic.Config{
		Authenticate: func(_ context.Context, req quic.AuthRequest) (quic.Identity, []byte, error) {
			if string(req.Frame[wire.FrameHeaderSize:]) != "secret" {
				return quic.Identity{}, nil, errors.New("unknown token")
			}
			return quic.Identity{TokenID: "admin"}, newFrame(wire.KindAuthenticate, wire.FlagReply, "welcome"), nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Shutdown(context.Background())
	go func() {
		ctx := context.Background()
		for {
			conn, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				for {
					s, err := conn.AcceptStream(ctx)
					if err != nil {
						return
					}
					go func() {
						defer s.Close()
						for {
							req, err := s.ReadFrame()
							if err != nil {
								return
							}
							body := "hello, " + string(req.Frame[wire.FrameHeaderSize:])
							// Replies go out in request order, in bursts.
							_ = s.WriteReply(req, newFrame(wire.KindPoll, wire.FlagReply, body))
						}
					}()
				}
			}()
		}
	}()

	ctx := context.Background()
	clientTLS, err := quic.ClientTLSConfigFromCAFile(store.Paths().CA, "")
	if err != nil {
		log.Fatal(err)
	}
	conn, err := quic.Dial(ctx, ln.Addr().String(), clientTLS, quic.ClientConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	s, err := conn.OpenStream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	p := quic.NewPipeline(s, 500)
	defer p.Close(ctx)
	reply, err := p.Do(ctx, newFrame(wire.KindAuthenticate, 0, "secret"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply[wire.FrameHeaderSize:]))
	reply, err = p.Do(ctx, newFrame(wire.KindPoll, 0, "edge"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply[wire.FrameHeaderSize:]), conn.TLS().NegotiatedProtocol, conn.TLS().Version == tls.VersionTLS13)
	// Output:
	// welcome
	// hello, edge ledge/1 true
}
