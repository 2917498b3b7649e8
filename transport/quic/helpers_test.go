package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/ledgemq/ledge/transport/quic/certs"
	"github.com/ledgemq/ledge/transport/wire"
)

// safety bounds every wait in these tests; none of them relies on it for
// correctness.
const safety = 20 * time.Second

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	return ctx
}

type testServer struct {
	ln  *Listener
	eph *certs.Ephemeral
}

func newTestServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	eph, err := certs.NewEphemeral("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	conf := ServerTLSConfig(nil)
	conf.Certificates = []tls.Certificate{eph.Server}
	ln, err := Listen("127.0.0.1:0", conf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return &testServer{ln: ln, eph: eph}
}

func (ts *testServer) clientTLS() *tls.Config { return ClientTLSConfig(ts.eph.CA.Pool(), "") }

func (ts *testServer) addr() string { return ts.ln.Addr().String() }

func (ts *testServer) dial(t testing.TB, cfg ClientConfig) *ClientConn {
	t.Helper()
	c, err := Dial(testContext(t), ts.addr(), ts.clientTLS(), cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// pipeline opens a stream on c and runs a pipeline on it.
func pipeline(t testing.TB, c *ClientConn, depth int) *Pipeline {
	t.Helper()
	s, err := c.OpenStream(testContext(t))
	if err != nil {
		t.Fatalf("OpenStream: %v", err)
	}
	return NewPipeline(s, depth)
}

// headerLen is the size of a frame header under the default framing.
const headerLen = wire.FrameHeaderSize

// frame builds a protocol frame (the kind does not matter to the
// transport).
func frame(body string) []byte {
	f, err := wire.AppendFrame(nil, wire.FrameHeader{Version: wire.ProtocolVersion, Kind: wire.KindPoll}, []byte(body))
	if err != nil {
		panic(err)
	}
	return f
}

func bodyOf(f []byte) string { return string(f[headerLen:]) }

// handler answers one request. It runs on the stream's reader goroutine, so
// the next frame is read only after it returns.
type handler func(s *Stream, r *Request)

func echo(s *Stream, r *Request) {
	_ = s.Reply(r, frame("echo:"+bodyOf(r.Frame)))
}

// serve accepts connections and streams until the listener closes, and
// runs h for every request.
func (ts *testServer) serve(t testing.TB, h handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		_ = ts.ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ts.ln.Accept(ctx)
			if err != nil {
				return
			}
			wg.Go(func() { serveConn(ctx, c, h, &wg) })
		}
	})
}

func serveConn(ctx context.Context, c *Conn, h handler, wg *sync.WaitGroup) {
	for {
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		wg.Go(func() {
			for {
				r, err := s.ReadFrame()
				if err != nil {
					_ = s.Close()
					return
				}
				h(s, r)
			}
		})
	}
}

// do sends one request on p and waits for its reply body.
func do(t testing.TB, p *Pipeline, body string) (string, error) {
	t.Helper()
	reply, err := p.Do(testContext(t), frame(body))
	if err != nil {
		return "", err
	}
	return bodyOf(reply), nil
}

func mustEcho(t testing.TB, p *Pipeline, body string) {
	t.Helper()
	got, err := do(t, p, body)
	if err != nil {
		t.Fatalf("request %q: %v", body, err)
	}
	if want := "echo:" + body; got != want {
		t.Fatalf("reply %q, want %q", got, want)
	}
}

// wait receives from ch or fails the test after the safety bound.
func wait[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(safety):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func readAll(t testing.TB, s *ClientStream) ([]string, error) {
	t.Helper()
	var out []string
	for {
		f, err := s.ReadFrame()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, bodyOf(f))
	}
}

func numbered(i int) string { return fmt.Sprintf("m%05d", i) }
