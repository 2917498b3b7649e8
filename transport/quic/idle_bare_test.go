package quic

import (
	"context"
	"crypto/tls"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	quicgo "github.com/quic-go/quic-go"
)

// bareServer is the floor TestIdleFootprint compares the transport
// with: quic-go as it comes (its default configuration, its own
// socket), serving the same frames with nothing of this package — a
// goroutine accepting each connection's streams, one reading each
// stream, a frame "poll" held unanswered, a first frame answered with
// "welcome". What it costs per idle connection is what quic-go and
// crypto/tls cost, which no setting of this package can take away.
type bareServer struct {
	ln      *quicgo.Listener
	parked  atomic.Int64
	streams atomic.Int64
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func serveBare(t testing.TB, tlsConf *tls.Config) *bareServer {
	t.Helper()
	ln, err := quicgo.ListenAddr("127.0.0.1:0", tlsConf, &quicgo.Config{MaxIdleTimeout: DefaultMaxIdleTimeout})
	if err != nil {
		t.Fatal(err)
	}
	bs := &bareServer{ln: ln}
	bs.ctx, bs.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() {
		bs.cancel()
		_ = ln.Close()
		bs.wg.Wait()
	})
	bs.wg.Go(func() {
		for {
			qc, err := ln.Accept(bs.ctx)
			if err != nil {
				return
			}
			bs.wg.Go(func() { bs.serveConn(qc) })
		}
	})
	return bs
}

func (bs *bareServer) serveConn(qc *quicgo.Conn) {
	defer qc.CloseWithError(0, "")
	for {
		st, err := qc.AcceptStream(bs.ctx)
		if err != nil {
			return
		}
		bs.streams.Add(1)
		bs.wg.Go(func() {
			defer bs.streams.Add(-1)
			bs.serveStream(qc, st)
		})
	}
}

func (bs *bareServer) serveStream(qc *quicgo.Conn, st *quicgo.Stream) {
	defer st.Close()
	framing := WireFraming()
	header := make([]byte, framing.HeaderLen)
	for {
		if _, err := io.ReadFull(st, header); err != nil {
			return
		}
		n, err := framing.FrameLen(header)
		if err != nil || n > 1<<10 {
			st.CancelRead(1)
			return
		}
		f := append(header[:len(header):len(header)], make([]byte, n-len(header))...)
		if _, err := io.ReadFull(st, f[len(header):]); err != nil {
			return
		}
		if bodyOf(f) != "poll" {
			_, _ = st.Write(frame("welcome"))
			continue
		}
		bs.parked.Add(1)
		select {
		case <-bs.ctx.Done():
		case <-qc.Context().Done():
		}
		bs.parked.Add(-1)
		return
	}
}

func (bs *bareServer) addr() string { return bs.ln.Addr().String() }

// settled reports whether n devices have parked their polls and ended
// their first streams.
func (bs *bareServer) settled(n int) bool {
	return bs.parked.Load() == int64(n) && bs.streams.Load() == int64(n)
}
