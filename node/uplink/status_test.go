package uplink

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// TestUplinkLagVisibleWhileKafkaIsAway: a forwarder that cannot reach
// Kafka from its start still shows its lag, read from the partition
// alone: the records not forwarded (from the log start, the position
// being unknown) and the age of the oldest, growing with the clock; and
// its failure state: since when it fails, the wait in progress and when
// it retries. Once Kafka is back, all of it clears.
//
// covers: G44
func TestUplinkLagVisibleWhileKafkaIsAway(t *testing.T) {
	w := newUplinkWorld(t, 1)
	w.produce(0, 25) // record timestamps 1_700_000_000_000
	var down atomic.Bool
	down.Store(true)
	w.kafka.RefuseWhile(&down)

	start := time.UnixMilli(1_700_000_000_000).Add(90 * time.Minute)
	now := start
	var f *Forwarder
	var seen []Status
	f = w.forwarder(0, func(c *Config) {
		c.Now = func() time.Time { return now }
		c.MinBackoff, c.MaxBackoff = time.Second, 4*time.Second
		c.Wait = func(ctx context.Context, d time.Duration) error {
			seen = append(seen, f.Status())
			now = now.Add(d)
			if len(seen) == 4 {
				down.Store(false)
			}
			return ctx.Err()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.cfg.Source = pollHook{Source: w.owners[0], before: func(req owner.PollRequest) {
		if req.MaxBytes != 1 && req.Offset >= 25 { // caught up (not the lag's peek)
			cancel()
		}
	}}
	if err := f.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	if len(seen) < 4 {
		t.Fatalf("%d backoffs, want 4", len(seen))
	}
	first := seen[0]
	if first.State != Backoff || first.Known || first.LagRecords != 25 || first.LagAge != 90*time.Minute ||
		first.Backoff != time.Second || !first.RetryAt.Equal(start.Add(time.Second)) ||
		!first.FailingSince.Equal(start) || first.Failures != 1 || first.LastError == "" {
		t.Fatalf("first backoff: %+v", first)
	}
	fourth := seen[3]
	if fourth.Backoff != 4*time.Second || !fourth.FailingSince.Equal(start) ||
		fourth.LagAge != 90*time.Minute+7*time.Second || fourth.LagRecords != 25 {
		t.Fatalf("fourth backoff: %+v", fourth)
	}
	s := f.Status()
	if s.LagRecords != 0 || s.LagAge != 0 || !s.FailingSince.IsZero() || s.Backoff != 0 || !s.RetryAt.IsZero() ||
		s.Forwarded != 25 || !s.Known || s.Position != 25 {
		t.Fatalf("after Kafka came back: %+v", s)
	}
	got, _ := w.readCommitted()
	w.checkExactlyOnce(got)
}

// TestUplinkShowsRetentionHeldBack: under block, the status says how many
// records the partition's retention kept only because the uplink had not
// forwarded them, and when; once they are forwarded and retention runs
// again, nothing is held back.
//
// covers: G45
func TestUplinkShowsRetentionHeldBack(t *testing.T) {
	w := newUplinkWorld(t, 1)
	var now time.Time
	f := w.forwarder(0, func(c *Config) {
		now = time.UnixMilli(1_700_000_000_000)
		c.Now = func() time.Time { return now }
	})
	o, err := owner.NewOwner(owner.OwnerConfig{Topic: w.topic, Log: w.logs[0], Meta: ownertest.NewMeta(), RetentionFloor: f.RetentionFloor})
	if err != nil {
		t.Fatal(err)
	}
	w.owners[0] = o
	f.cfg.Source, f.stats.source = o, o

	w.produce(0, 30) // 3 batches of 10
	w.drain(f, 0, 0)
	w.produce(0, 40)               // 30..69, not forwarded
	w.logs[0].SetRetentionWant(60) // retention wants to drop 0..59
	if _, err := o.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	s := f.Status()
	if st := o.State(); st.LogStart != 30 {
		t.Fatalf("log start %d, want 30: the floor keeps what was not forwarded", st.LogStart)
	}
	if s.HeldBack != 30 || !s.HeldBackAt.Equal(now) || s.LagRecords != 40 {
		t.Fatalf("status %+v, want 30 records held back", s)
	}
	w.drain(f, 0, 0)
	if _, err := o.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	if s := f.Status(); s.HeldBack != 0 || s.LagRecords != 0 {
		t.Fatalf("after forwarding: %+v", s)
	}
}
