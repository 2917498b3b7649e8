package node

import (
	"errors"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/session"
	"github.com/ledgemq/ledge/transport/quic"
	"github.com/ledgemq/ledge/transport/wire"
)

// A node holding as many produce requests as it may answers the next one
// busy, with a retry-after for a client that reads one, and stores
// nothing of it; the requests it accepted are all answered and stored,
// and once they are, it accepts again.
func TestProducePastTheBoundIsBusy(t *testing.T) {
	for _, reads := range []bool{true, false} {
		name := map[bool]string{true: "client reads retry-after", false: "older client"}[reads]
		t.Run(name, func(t *testing.T) {
			store := newMemStorage()
			shed := make(shedSignal, 1)
			tn := startNode(t, store, func(cfg *Config) {
				cfg.Shed = session.ShedConfig{MaxRequests: 2, DelayTarget: -1, RetryAfter: 700 * time.Millisecond, Metrics: shed}
			})
			c := tn.mustDialFlags(t, tn.admin, map[bool]wire.AuthFlags{true: wire.AuthReadsRetryAfter}[reads])
			c.createTopic("t", wire.TopicConfig{})
			tp, err := tn.lookup("t", [16]byte{})
			if err != nil {
				t.Fatal(err)
			}
			log := tp.Logs[0]

			// Two produce requests wait for durability: the node is full.
			release := store.holdDurability()
			s := c.stream()
			var chs []<-chan reply
			for _, v := range []string{"a", "b", "c"} {
				chs = append(chs, c.send(s, &wire.ProduceRequest{Topic: "t", Batch: batch(t, 0, 0, 0, v)}))
			}
			select {
			case reason := <-shed:
				if reason != "requests" {
					t.Fatalf("shed on %s, want requests", reason)
				}
			case <-time.After(safety):
				t.Fatal("the third produce was not shed")
			}
			release()

			for i, ch := range chs[:2] {
				var rep wire.ProduceReply
				if err := await(t, ch, &rep); err != nil || rep.BaseOffset != uint64(i) {
					t.Fatalf("accepted produce %d: offset %d, %v", i, rep.BaseOffset, err)
				}
			}
			var e *wire.Error
			if err := await(t, chs[2], &wire.ProduceReply{}); !errors.As(err, &e) || e.Status != wire.StatusBusy {
				t.Fatalf("produce past the bound: got %v, want busy", err)
			}
			wantHint := map[bool]time.Duration{true: 700 * time.Millisecond}[reads]
			if e.RetryAfter != wantHint {
				t.Fatalf("retry after %v, want %v", e.RetryAfter, wantHint)
			}
			if hw := log.State().HighWatermark; hw != 2 {
				t.Fatalf("high watermark %d: the busy produce changed the log", hw)
			}

			if _, err := c.produce(s, "t", 0, batch(t, 0, 0, 0, "c")); err != nil {
				t.Fatalf("produce once the node has room: %v", err)
			}
			if st := tn.shed.Stats(); st.Shed["requests"] != 1 || st.Requests != 0 {
				t.Fatalf("shedder %+v", st)
			}
		})
	}
}

// mustDialFlags is mustDial with an Authenticate that announces flags.
func (tn *testNode) mustDialFlags(t testing.TB, token string, flags wire.AuthFlags) *client {
	t.Helper()
	ctx := safetyContext(t)
	tlsConf, err := quic.ClientTLSConfigFromCAFile(tn.Paths().CA, "")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := quic.Dial(ctx, tn.Addr(), tlsConf, quic.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s, err := conn.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, conn: conn, main: quic.NewPipeline(s, 64)}
	if err := c.call(c.main, &wire.AuthenticateRequest{Token: token, Flags: flags}, &wire.AuthenticateReply{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// shedSignal receives the reason of every request shed.
type shedSignal chan string

func (s shedSignal) QueueDelay(time.Duration) {}
func (s shedSignal) Shed(reason string)       { s <- reason }
