package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/internal/syncbuf"
	"github.com/ledgemq/ledge/node/ops"
	"github.com/ledgemq/ledge/node/ops/opstest"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/uplink"
	"github.com/ledgemq/ledge/node/uplink/uplinktest"
	"github.com/ledgemq/ledge/record"
	"github.com/ledgemq/ledge/transport/wire"
)

// uplinkNode is a node on the storage engine with one topic forwarded to a
// kfake cluster. The node's uplinks run with an injected backoff: a
// forwarder that failed while Kafka is away reports it on backedOff and
// waits for resume, so the test knows when Kafka's absence was noticed and
// decides when the forwarder tries again. A step that failed while Kafka
// is reachable ran out of its step deadline on a loaded machine: it is
// retried at once, as the backoff would, without the test's say.
type uplinkNode struct {
	t      *testing.T
	tn     *testNode
	ops    *opsServer
	kafka  *uplinktest.Kafka // the cluster, its refusal switch and its reader
	down   atomic.Bool
	logs   syncbuf.Buffer
	owner  *owner.Owner
	values []string

	clockMu sync.Mutex
	now     time.Time

	backedOff chan struct{}
	resume    chan struct{}
	targetMu  sync.Mutex
	target    uint64 // caughtUp is signalled when a poll asks for this offset
	caughtUp  chan struct{}
}

// heldHook calls before ahead of every poll of its source, and reports
// the owner's retention hold.
type heldHook struct {
	uplink.Source
	before func(owner.PollRequest)
	o      *owner.Owner
}

func (h heldHook) Poll(ctx context.Context, req owner.PollRequest) (owner.PollResult, error) {
	h.before(req)
	return h.Source.Poll(ctx, req)
}

func (h heldHook) RetentionHold() owner.RetentionHold { return h.o.RetentionHold() }

func (u *uplinkNode) clock() time.Time {
	u.clockMu.Lock()
	defer u.clockMu.Unlock()
	return u.now
}

func (u *uplinkNode) advance(d time.Duration) {
	u.clockMu.Lock()
	u.now = u.now.Add(d)
	u.clockMu.Unlock()
}

func newUplinkNode(t *testing.T, cfg wire.TopicConfig, overflow uplink.Overflow) *uplinkNode {
	u := &uplinkNode{t: t, kafka: uplinktest.NewKafka(t, 1), now: time.UnixMilli(1_700_000_000_000),
		backedOff: make(chan struct{}), resume: make(chan struct{}), caughtUp: make(chan struct{}, 1)}
	u.kafka.RefuseWhile(&u.down)
	u.tn = startNode(t, nil, func(c *Config) {
		c.Now = u.clock
		c.Logger = slog.New(slog.NewTextHandler(&u.logs, nil))
	})
	n := u.tn.Node
	if _, err := n.CreateTopic(context.Background(), "events", cfg); err != nil {
		t.Fatal(err)
	}
	top, err := n.lookup("events", [16]byte{})
	if err != nil {
		t.Fatal(err)
	}
	u.owner = top.Owners[0]
	partitions := func(name string) (fence.TopicID, []uplink.Source, error) {
		id, srcs, err := n.uplinkPartitions(name)
		for i, s := range srcs {
			srcs[i] = heldHook{Source: s, before: func(req owner.PollRequest) {
				u.targetMu.Lock()
				defer u.targetMu.Unlock()
				if req.MaxBytes != 1 && req.Offset >= u.target {
					select {
					case u.caughtUp <- struct{}{}:
					default:
					}
				}
			}, o: s.(*owner.Owner)}
		}
		return id, srcs, err
	}
	// The node's own manager has nothing running yet; this one has the
	// injected backoff. The retention floor reads n.uplinks.
	n.uplinks = uplink.NewManager(uplink.ManagerConfig{NodeID: "edge-1", Meta: n.meta, Partitions: partitions, Template: uplink.Config{
		Now: u.clock, Logger: n.log, KafkaOpts: uplinktest.FastKafka(), StepTimeout: 250 * time.Millisecond, PollWait: time.Millisecond,
		Wait: func(ctx context.Context, _ time.Duration) error {
			if !u.down.Load() {
				return ctx.Err()
			}
			select {
			case u.backedOff <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case <-u.resume:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}})
	u.setTarget(^uint64(0))
	spec := uplink.Spec{Topic: "events", Seeds: u.kafka.ListenAddrs(), To: uplinktest.Topic, Overflow: overflow}
	if err := n.uplinks.Add(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	u.ops = newOpsServer(t, ops.HTTPConfig{})
	u.ops.Attach(n)
	return u
}

// produce appends batches of 10 records of 200 bytes through the owner,
// stamped with the node's clock.
func (u *uplinkNode) produce(batches int) {
	u.t.Helper()
	for range batches {
		var b record.BatchBuilder
		for range 10 {
			v := fmt.Sprintf("%06d-%s", len(u.values), strings.Repeat("x", 193))
			u.values = append(u.values, v)
			b.Append(record.Record{Timestamp: u.clock().UnixMilli(), Value: []byte(v)})
		}
		out, err := b.Build(record.CompressionNone)
		if err != nil {
			u.t.Fatal(err)
		}
		if _, err := u.owner.Produce(context.Background(), out); err != nil {
			u.t.Fatal(err)
		}
	}
}

// waitCaughtUp waits until the forwarder asks for the records past the
// high watermark.
func (u *uplinkNode) waitCaughtUp() {
	u.t.Helper()
	u.setTarget(u.owner.State().HighWatermark)
	select {
	case <-u.caughtUp:
	case <-safetyContext(u.t).Done():
		u.t.Fatalf("the uplink did not catch up: %+v", u.tn.Node.uplinks.List())
	}
	u.setTarget(^uint64(0))
}

// setTarget sets the offset whose poll signals caughtUp, and forgets a
// signal of an earlier target.
func (u *uplinkNode) setTarget(off uint64) {
	u.targetMu.Lock()
	defer u.targetMu.Unlock()
	u.target = off
	select {
	case <-u.caughtUp:
	default:
	}
}

func (u *uplinkNode) status() ops.UplinkPartitionStatus {
	u.t.Helper()
	st := u.ops.status(u.t)
	if len(st.Uplinks) != 1 || len(st.Uplinks[0].Partitions) != 1 {
		u.t.Fatalf("status page uplinks: %+v", st.Uplinks)
	}
	return st.Uplinks[0].Partitions[0]
}

func (u *uplinkNode) metric(name string) float64 {
	u.t.Helper()
	return opstest.MustMetric(u.t, u.ops.Metrics().Registry(), name, "topic", "events", "partition", "0")
}

// TestUplinkRetentionWhileKafkaIsAway, end to end on a node and the
// storage engine: the uplink forwards, then Kafka becomes unreachable while
// records keep arriving and retention (by bytes, or by age) runs.
//
// Under block, nothing unforwarded is deleted: the log start stays at or
// below the uplink's position, the status page and the metrics show the
// records retention held back and the lag, and once Kafka is back every
// record arrives exactly once. Under drop-oldest, retention deletes as
// configured; the records it deleted unforwarded are counted as dropped in
// the status page and the metrics, logged, and everything else arrives
// exactly once.
//
// covers: G44 G45 G47
func TestUplinkRetentionWhileKafkaIsAway(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      wire.TopicConfig
		overflow uplink.Overflow
	}{
		{"block/bytes", wire.TopicConfig{RetentionBytes: 8 << 10, SegmentBytes: 4 << 10}, uplink.Block},
		{"block/age", wire.TopicConfig{RetentionAge: time.Hour, SegmentBytes: 4 << 10}, uplink.Block},
		{"drop-oldest/bytes", wire.TopicConfig{RetentionBytes: 8 << 10, SegmentBytes: 4 << 10}, uplink.DropOldest},
		{"drop-oldest/age", wire.TopicConfig{RetentionAge: time.Hour, SegmentBytes: 4 << 10}, uplink.DropOldest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUplinkNode(t, tc.cfg, tc.overflow)
			u.produce(3)
			u.waitCaughtUp()
			forwarded := u.owner.State().HighWatermark

			u.down.Store(true)
			u.produce(40) // ~80 KiB: far over the retention limit
			<-u.backedOff // the forwarder noticed Kafka is away
			for range 6 { // 3 h in steps the engine's jump-free clock counts
				u.advance(30 * time.Minute)
				u.tn.Node.EnforceRetention()
			}
			st := u.owner.State()
			s := u.status()
			const outage = 3 * 3600 // s: the clock advanced 3 h since the failure
			age := float64(outage)  // the oldest unforwarded record was appended before it
			if st.LogStart == st.HighWatermark {
				age = 0 // drop-oldest deleted everything: nothing is behind
			}
			if s.State != "backoff" || s.LagRecords != st.HighWatermark-max(forwarded, st.LogStart) ||
				s.LagAgeSeconds != age || s.FailingSeconds != outage || s.LastError == "" {
				t.Fatalf("status during the outage: %+v (partition %+v)", s, st)
			}
			if got := u.metric("ledge_uplink_lag_seconds"); got != age {
				t.Errorf("ledge_uplink_lag_seconds = %v, want %v", got, age)
			}
			if got := u.metric("ledge_uplink_failing_seconds"); got != outage {
				t.Errorf("ledge_uplink_failing_seconds = %v, want %v", got, outage)
			}
			if got := u.metric("ledge_uplink_lag_records"); got != float64(s.LagRecords) {
				t.Errorf("ledge_uplink_lag_records = %v, want %d", got, s.LagRecords)
			}
			if got := opstest.MustMetric(t, u.ops.Metrics().Registry(), "ledge_uplink_state", "topic", "events", "partition", "0", "state", "backoff"); got != 1 {
				t.Errorf("ledge_uplink_state{state=backoff} = %v", got)
			}
			var dropped uint64
			if tc.overflow == uplink.Block {
				if st.LogStart > forwarded {
					t.Fatalf("log start %d: retention deleted records the uplink had not forwarded (position %d)", st.LogStart, forwarded)
				}
				if s.HeldBack == 0 || u.metric("ledge_uplink_retention_held_records") != float64(s.HeldBack) {
					t.Fatalf("held back not shown: status %+v, metric %v", s, u.metric("ledge_uplink_retention_held_records"))
				}
				if !strings.Contains(u.logs.String(), "retention held back") {
					t.Errorf("the log does not say retention was held back")
				}
			} else {
				if st.LogStart <= forwarded {
					t.Fatalf("log start %d: drop-oldest retention did not delete unforwarded records", st.LogStart)
				}
				if s.HeldBack != 0 {
					t.Fatalf("drop-oldest held records back: %+v", s)
				}
				dropped = st.LogStart - forwarded
			}

			u.down.Store(false)
			u.resume <- struct{}{}
			u.waitCaughtUp()
			s = u.status()
			if s.Dropped != dropped || u.metric("ledge_uplink_dropped_records_total") != float64(dropped) ||
				s.LagRecords != 0 || s.FailingSeconds != 0 || s.State != "forwarding" {
				t.Fatalf("after Kafka came back: %+v, want %d dropped", s, dropped)
			}
			if dropped > 0 && !strings.Contains(u.logs.String(), "overflow drop-oldest") {
				t.Errorf("the log does not report the dropped records")
			}
			got, _ := u.kafka.ReadCommitted(uplink.HeaderLedgeOffset)
			uplinktest.CheckValues(t, got[0], append(append([]string(nil), u.values[:forwarded]...), u.values[forwarded+dropped:]...))
		})
	}
}
