package kafka

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ledgemq/ledge/transport/wire"
)

// pipeListener hands the listener in-memory connections, so that a test
// runs in a synctest bubble, its deadlines on the bubble's clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092} }

// dial connects a raw client; the connection is accepted once the
// listener's goroutine takes it.
func (l *pipeListener) dial(t *testing.T) *rawClient {
	c, s := net.Pipe()
	l.conns <- s
	return &rawClient{t: t, c: c, r: bufio.NewReader(c)}
}

// pipeServer starts a listener of backend on a pipeListener; the test
// closes it (s.Close) before its bubble ends.
func pipeServer(cfg Config, backend Backend) (*Server, *pipeListener) {
	ln := newPipeListener()
	cfg.Backend = backend
	return serveListener(cfg, ln), ln
}

// closed reports whether the node closed rc's connection.
func closed(rc *rawClient) bool {
	_ = rc.c.SetReadDeadline(time.Now().Add(time.Millisecond))
	defer rc.c.SetReadDeadline(time.Time{})
	_, err := rc.r.ReadByte()
	return err == io.EOF || err == io.ErrClosedPipe
}

// TestBoundsBeforeAuthentication: a connection that does not
// authenticate within AuthTimeout, whatever it sends, is closed; so is
// one that announces a request over MaxUnauthenticatedRequestBytes
// before authenticating, at once. Each is counted by reason.
func TestBoundsBeforeAuthentication(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &recordedMetrics{}
		s, ln := pipeServer(Config{Metrics: m}, fakeBackend{})
		defer s.Close()

		silent := ln.dial(t)
		chatty := ln.dial(t)
		// ApiVersions keeps the connection open, but does not extend
		// its time to authenticate.
		time.Sleep(DefaultAuthTimeout / 2)
		if err := chatty.send(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()); err != nil {
			t.Fatalf("ApiVersions before authentication: %v", err)
		}
		time.Sleep(DefaultAuthTimeout/2 - time.Second)
		synctest.Wait()
		if len(m.closedFor()) != 0 {
			t.Fatalf("closed before the authentication deadline: %v", m.closedFor())
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !closed(silent) || !closed(chatty) {
			t.Fatal("a connection that did not authenticate is open past the deadline")
		}
		if got := m.closedFor(); !slices.Equal(got, []string{reasonAuthTimeout, reasonAuthTimeout}) {
			t.Fatalf("closed for %v, want auth_timeout twice", got)
		}

		big := ln.dial(t)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 100<<20)
		_, _ = big.c.Write(hdr[:])
		synctest.Wait()
		if !closed(big) {
			t.Fatal("a 100 MiB request announced before authentication did not close the connection")
		}
		if got := m.closedFor(); got[len(got)-1] != reasonTooLarge {
			t.Fatalf("closed for %v, want too_large", got)
		}
	})
}

// TestDeadlinesAfterAuthentication: an authenticated connection that
// sends nothing for IdleTimeout is closed, and so is one whose request
// stops arriving for ReadTimeout; one that keeps sending requests stays.
func TestDeadlinesAfterAuthentication(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &recordedMetrics{}
		s, ln := pipeServer(Config{Metrics: m}, fakeBackend{})
		defer s.Close()

		idle, busy, half := ln.dial(t), ln.dial(t), ln.dial(t)
		for _, rc := range []*rawClient{idle, busy, half} {
			if code := rc.authenticate("good"); code != 0 {
				t.Fatalf("authentication: %v", kerr.ErrorForCode(code))
			}
		}
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 1000)
		_, _ = half.c.Write(append(hdr[:], 0, 18, 0, 0)) // four bytes of 1,000
		time.Sleep(DefaultReadTimeout + time.Second)
		synctest.Wait()
		if !closed(half) {
			t.Fatal("a half-sent request kept its connection past ReadTimeout")
		}
		for range 2 * int(DefaultIdleTimeout/time.Minute) {
			time.Sleep(time.Minute / 2)
			if err := busy.send(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()); err != nil {
				t.Fatalf("a connection sending a request every 30 s was closed: %v", err)
			}
		}
		synctest.Wait()
		if !closed(idle) {
			t.Fatal("an idle connection is open past IdleTimeout")
		}
		if got := m.closedFor(); !slices.Equal(got, []string{reasonReadTimeout, reasonIdle}) {
			t.Fatalf("closed for %v, want read_timeout then idle", got)
		}
	})
}

// TestConnectionCaps: one unauthenticated connection past
// MaxUnauthenticated evicts the oldest unauthenticated one, never an
// authenticated one; a connection arriving while MaxConns are
// authenticated is refused at once.
func TestConnectionCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &recordedMetrics{}
		s, ln := pipeServer(Config{Metrics: m, MaxUnauthenticated: 2, MaxConns: 2}, fakeBackend{})
		defer s.Close()

		authed := ln.dial(t)
		if code := authed.authenticate("good"); code != 0 {
			t.Fatalf("authentication: %v", kerr.ErrorForCode(code))
		}
		first, second, third := ln.dial(t), ln.dial(t), ln.dial(t)
		synctest.Wait()
		if !closed(first) || closed(second) || closed(third) {
			t.Fatal("a third unauthenticated connection did not evict the first, and only it")
		}
		if err := authed.send(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse()); err != nil {
			t.Fatalf("the authenticated connection was closed by the unauthenticated ones: %v", err)
		}
		if code := second.authenticate("good"); code != 0 {
			t.Fatalf("authentication: %v", kerr.ErrorForCode(code))
		}
		refused := ln.dial(t)
		synctest.Wait()
		if !closed(refused) {
			t.Fatal("a connection arriving while MaxConns are authenticated was accepted")
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if !slices.Equal(m.refused, []string{reasonConnLimit}) || !slices.Contains(m.closed, reasonEvicted) {
			t.Fatalf("refused for %v, closed for %v; want conn_limit and evicted", m.refused, m.closed)
		}
	})
}

// TestAnnouncedSizeIsNotAllocated: a request that announces 100 MiB and
// sends a few bytes costs what it sent, not what it announced.
func TestAnnouncedSizeIsNotAllocated(t *testing.T) {
	cc := &conn{s: &Server{cfg: Config{ReadTimeout: time.Minute}}, c: nopConn{}}
	sent := append([]byte{0, 0, 0, 0}, bytes.Repeat([]byte{1}, 1000)...) // an api key 0: a Produce
	var reuse []byte
	grown := allocatedBy(func() {
		if _, err := cc.readBody(bufio.NewReader(bytes.NewReader(sent)), 100<<20, &reuse); err == nil {
			t.Error("a request cut short was read whole")
		}
	})
	if grown > 1<<20 {
		t.Fatalf("reading 1,004 bytes of a request announcing 100 MiB allocated %d bytes", grown)
	}
}

// nopConn is a connection whose deadlines do nothing.
type nopConn struct{ net.Conn }

func (nopConn) SetReadDeadline(time.Time) error { return nil }

// allocatedBy is how many bytes fn allocated on the heap.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// authzSession serves produce to topic "allowed" only; it records the
// batches it was handed.
type authzSession struct {
	nopSession
	mu      sync.Mutex
	batches [][]byte
}

func (s *authzSession) Authorize(_ context.Context, topic string, _ int32, _ wire.Scope) error {
	if topic != "allowed" {
		return &wire.Error{Status: wire.StatusForbidden, Message: "not this topic"}
	}
	return nil
}

func (s *authzSession) Produce(_ context.Context, m *wire.ProduceRequest) (*wire.ProduceReply, func(context.Context) error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, m.Batch)
	return &wire.ProduceReply{}, nil, nil
}

type authzBackend struct{ s *authzSession }

func (b authzBackend) Authenticate(string, string) (Session, error) { return b.s, nil }

// TestHostileProduce: a 69-byte batch claiming 2,147,483,647 records is
// refused as CORRUPT_MESSAGE without allocating for them, and a Produce
// to a topic the token may not write is refused before its batch is
// looked at (a corrupt batch meets TOPIC_AUTHORIZATION_FAILED).
func TestHostileProduce(t *testing.T) {
	sess := &authzSession{}
	s := serveListenerTCP(t, Config{}, authzBackend{sess})
	rc := dialServer(t, s)
	if code := rc.authenticate("any"); code != 0 {
		t.Fatalf("authentication: %v", kerr.ErrorForCode(code))
	}
	hostile := sealBatch(kmsg.RecordBatch{Magic: 2, NumRecords: math.MaxInt32, ProducerID: -1, Records: []byte{14, 0, 0, 0, 0, 2, 'v', 0}})
	produce := func(topic string, batch []byte) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 7, -1, 1000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
		resp := kmsg.NewPtrProduceResponse()
		if err := rc.send(req, resp); err != nil {
			t.Fatalf("produce: %v", err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	var code int16
	grown := allocatedBy(func() { code = produce("allowed", hostile) })
	if code != kerr.CorruptMessage.Code {
		t.Fatalf("a batch claiming %d records in %d bytes: %v, want CORRUPT_MESSAGE", math.MaxInt32, len(hostile), kerr.ErrorForCode(code))
	}
	if grown > 1<<20 {
		t.Fatalf("a %d-byte batch claiming %d records allocated %d bytes", len(hostile), math.MaxInt32, grown)
	}
	corrupt := slices.Clone(hostile)
	corrupt[20] ^= 0xff // the CRC
	if code := produce("other", corrupt); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("a corrupt batch to a topic the token may not write: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if len(sess.batches) != 0 {
		t.Fatalf("%d batches reached the node", len(sess.batches))
	}
}

// serveListenerTCP starts a listener of backend on a loopback port.
func serveListenerTCP(t *testing.T, cfg Config, backend Backend) *Server {
	t.Helper()
	cfg.Listen, cfg.Backend = "127.0.0.1:0", backend
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSharedAdmission: with an Admission shared with another listener,
// that listener's connections count against the same caps. Its
// unauthenticated connections filling the cap are evicted by a Kafka
// connection, oldest first; while its authenticated connections fill the
// cap of authenticated ones, a Kafka connection is refused; and the
// metrics count Kafka's connections only, by reason.
func TestSharedAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &recordedMetrics{}
		shared := &localAdmission{maxConns: 2, maxUnauth: 2}
		s, ln := pipeServer(Config{Metrics: m, Admission: shared, MaxConns: 100, MaxUnauthenticated: 100}, fakeBackend{})
		defer s.Close()

		other := func() Place {
			p, err := shared.Admit(nil)
			if err != nil {
				t.Fatalf("the other listener's connection: %v", err)
			}
			return p
		}
		oldest, newer := other(), other()
		kc := ln.dial(t)
		synctest.Wait()
		if err := oldest.Authenticated(""); err != ErrEvicted {
			t.Fatalf("a Kafka connection did not evict the other listener's oldest: %v", err)
		}
		if err := newer.Authenticated(""); err != nil {
			t.Fatalf("the other listener's newer connection: %v", err)
		}
		// The other listener holds one authenticated place, Kafka takes
		// the second: the cap of 2 is full for both.
		if code := kc.authenticate("good"); code != 0 {
			t.Fatalf("authentication: %v", kerr.ErrorForCode(code))
		}
		if _, err := shared.Admit(nil); err != ErrConnLimit {
			t.Fatalf("the other listener admitted past the shared cap: %v", err)
		}
		refused := ln.dial(t)
		synctest.Wait()
		if !closed(refused) {
			t.Fatal("a Kafka connection was accepted past the shared cap")
		}
		newer.Release()
		later := ln.dial(t)
		synctest.Wait()
		if closed(later) {
			t.Fatal("a Kafka connection was refused after the other listener gave its place back")
		}
		// Two unauthenticated connections of the other listener evict
		// the Kafka one waiting to authenticate.
		other()
		other()
		synctest.Wait()
		if !closed(later) {
			t.Fatal("the other listener's connections did not evict the older Kafka one")
		}
		synctest.Wait()
		m.mu.Lock()
		defer m.mu.Unlock()
		if !slices.Equal(m.refused, []string{reasonConnLimit}) || !slices.Equal(m.closed, []string{reasonEvicted}) {
			t.Fatalf("refused for %v, closed for %v; want one conn_limit refusal and one eviction", m.refused, m.closed)
		}
	})
}
