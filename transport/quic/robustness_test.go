package quic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
)

func TestGarbageDatagrams(t *testing.T) {
	cfg := authConfig()
	// With a reset key the server also answers unknown short-header
	// packets with stateless resets: they must not reach the real client.
	cfg.StatelessResetKey = &[32]byte{1, 2, 3}
	ts := newTestServer(t, cfg)
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	p := pipeline(t, c, 8)
	if _, err := do(t, p, "token:alice"); err != nil {
		t.Fatal(err)
	}

	// A plain UDP socket sprays random datagrams at the server's port and
	// at the client's: short ones, full-size ones, and ones dressed as QUIC
	// long-header (Initial, Handshake) and short-header packets.
	junk, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	clientAddr := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port(c.LocalAddr())}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1500)
	for i := range 3000 {
		n := 1 + rng.IntN(len(buf))
		for j := range buf[:n] {
			buf[j] = byte(rng.Uint32())
		}
		switch i % 4 {
		case 1: // long header, QUIC v1: an Initial or Handshake look-alike
			buf[0] = 0xc0 | buf[0]&0x3f
			if n >= 5 {
				binary.BigEndian.PutUint32(buf[1:5], 1)
			}
		case 2: // short header
			buf[0] = 0x40 | buf[0]&0x3f
		}
		to := ts.ln.Addr()
		if i%3 == 0 {
			to = clientAddr
		}
		if _, err := junk.WriteTo(buf[:n], to); err != nil {
			t.Fatal(err)
		}
	}

	// The connected client goes on as if nothing happened...
	for i := range 50 {
		mustEcho(t, p, numbered(i))
	}
	if err := c.Err(); err != nil {
		t.Fatalf("connection disturbed: %v", err)
	}
	// ...and a new client still gets in.
	fresh := pipeline(t, ts.dial(t, ClientConfig{}), 1)
	if _, err := do(t, fresh, "token:bob"); err != nil {
		t.Fatal(err)
	}
	mustEcho(t, fresh, "after the noise")
}

func TestOversizedFrame(t *testing.T) {
	const limit = 64 << 10
	ts := newTestServer(t, Config{MaxFrameSize: limit})
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	victim := pipeline(t, c, 8)
	bystander := pipeline(t, c, 8)
	mustEcho(t, victim, "before")
	mustEcho(t, bystander, "before")

	results := make(chan error, 3)
	for _, f := range [][]byte{frame("small, answered"), frame(strings.Repeat("x", limit)), frame("after the big one")} {
		err := victim.Send(testContext(t), f, func(_ []byte, err error) { results <- err })
		if err != nil {
			// The stream may already have ended: Send reports why.
			results <- err
		}
	}
	if err := wait(t, results, "the small request"); err != nil {
		t.Errorf("request before the oversized one: %v", err)
	}
	for range 2 {
		err := wait(t, results, "a request after the limit")
		if !errors.Is(err, ErrFrameTooLarge) || !errors.Is(err, ErrNotProcessed) || IsRetryable(err) {
			t.Errorf("err = %v, want a non-retryable ErrFrameTooLarge that was not processed", err)
		}
	}
	// The other stream, and new ones, keep working on the same connection.
	mustEcho(t, bystander, "still here")
	mustEcho(t, pipeline(t, c, 1), "new stream")
	if err := c.Err(); err != nil {
		t.Errorf("connection closed: %v", err)
	}
	if n := ts.ln.Stats().FramesTooLarge; n != 1 {
		t.Errorf("FramesTooLarge = %d, want 1", n)
	}
}

func TestHugeLengthIsNotAllocated(t *testing.T) {
	// A header announcing ~4 GiB with a few bytes behind it is refused from
	// the header alone.
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	s, err := c.OpenStream(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	raw := frame("tiny")
	binary.LittleEndian.PutUint32(raw, 0xfffffff0)
	s.wmu.Lock()
	_, err = s.bw.Write(raw)
	s.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// The server stops reading the stream and, with nothing to answer,
	// resets it with the reason.
	if _, err := readAll(t, s); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("reading the refused stream: err = %v, want ErrFrameTooLarge", err)
	}
	if n := ts.ln.Stats().FramesTooLarge; n != 1 {
		t.Errorf("FramesTooLarge = %d, want 1", n)
	}
	mustEcho(t, pipeline(t, c, 1), "the connection lives")
}

func TestTruncatedFrame(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	c := ts.dial(t, ClientConfig{})
	s, err := c.OpenStream(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	f := frame("a frame cut short")
	s.wmu.Lock()
	_, _ = s.bw.Write(f[:len(f)-3])
	s.wmu.Unlock()
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, s); !errors.Is(err, ErrProtocol) {
		t.Fatalf("reading the refused stream: err = %v, want ErrProtocol", err)
	}
	if n := ts.ln.Stats().ProtocolErrors; n != 1 {
		t.Errorf("ProtocolErrors = %d, want 1", n)
	}
	mustEcho(t, pipeline(t, c, 1), "the connection lives")
}

func TestOversizedReply(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, func(s *Stream, r *Request) {
		_ = s.Reply(r, frame(strings.Repeat("y", 8<<10)))
	})
	c := ts.dial(t, ClientConfig{MaxFrameSize: 4 << 10})
	_, err := do(t, pipeline(t, c, 1), "give me a lot")
	var tooLarge *FrameTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Max != 4<<10 {
		t.Fatalf("err = %v, want a FrameTooLargeError at 4 KiB", err)
	}
	if c.Err() != nil {
		t.Errorf("connection closed: %v", c.Err())
	}
}

func TestBackpressure(t *testing.T) {
	// A budget of two 3 KiB frames: a third waits until one is released,
	// and the wait is reported.
	const size = 3 << 10
	waits := make(chan int, 4)
	ts := newTestServer(t, Config{
		MaxFrameSize:   size,
		InflightBudget: 2 * size,
		OnBackpressure: func(n int) { waits <- n },
	})
	held := make(chan *Request, 4)
	ts.serve(t, func(s *Stream, r *Request) { held <- r })
	c := ts.dial(t, ClientConfig{})
	body := strings.Repeat("z", size-headerLen)
	for range 3 {
		s, err := c.OpenStream(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteFrame(frame(body)); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	first := wait(t, held, "a request")
	wait(t, held, "a second request")
	if n := wait(t, waits, "the backpressure report"); n != size {
		t.Errorf("waiting for %d bytes, want %d", n, size)
	}
	st := ts.ln.Stats()
	if st.BudgetInUse != 2*size || st.BudgetWaiting != 1 || st.BudgetWaits != 1 {
		t.Errorf("stats while blocked: in use %d, waiting %d, waits %d", st.BudgetInUse, st.BudgetWaiting, st.BudgetWaits)
	}
	select {
	case <-held:
		t.Fatal("a third request was read past the budget")
	default:
	}
	first.Release()
	third := wait(t, held, "the third request once budget was freed")
	if !bytes.Equal(third.Frame, frame(body)) {
		t.Error("the third request's bytes differ")
	}
}

func TestWriteReplyUnderTightBudget(t *testing.T) {
	// Deferred replies hold budget until they are flushed; a reader that
	// waits for budget must send them first, or the stream would stall.
	const n = 200
	body := strings.Repeat("q", 1000)
	ts := newTestServer(t, Config{MaxFrameSize: 2048, InflightBudget: 4096})
	ts.serve(t, func(s *Stream, r *Request) {
		_ = s.WriteReply(r, frame("echo:"+bodyOf(r.Frame)[:8]))
	})
	p := pipeline(t, ts.dial(t, ClientConfig{}), n)
	got := make(chan string, n)
	for i := range n {
		err := p.Send(testContext(t), frame(numbered(i)+body), func(reply []byte, err error) {
			if err != nil {
				got <- err.Error()
				return
			}
			got <- bodyOf(reply)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		want := "echo:" + (numbered(i) + body)[:8]
		if r := wait(t, got, "a reply"); r != want {
			t.Fatalf("reply %d = %q, want %q", i, r, want)
		}
	}
}
