package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/record"
)

// model is a tiny in-memory partition: what the engine must answer.
type model struct {
	recs  []readRec // offset order
	start uint64
	next  uint64
	epoch uint64
}

func (m *model) readFrom(from uint64) []readRec {
	i, _ := slices.BinarySearchFunc(m.recs, from, func(r readRec, off uint64) int {
		switch {
		case r.off < off:
			return -1
		case r.off > off:
			return 1
		}
		return 0
	})
	return m.recs[i:]
}

// TestMetamorphic runs one random sequence of operations on the engine
// under several configurations (durability, segment size, index spacing,
// tail cache) and on a model, and requires the same answers from all.
func TestMetamorphic(t *testing.T) {
	configs := []struct {
		name string
		d    Durability
		seg  int64
		idx  int
		tail int
	}{
		{"always-small", DurabilityAlways, 4096, 64, -1},
		{"none-large", DurabilityNone, 1 << 20, 4096, 1 << 20},
		{"interval-tiny-cache", DurabilityInterval, 8192, 512, 3000},
	}
	for seed := 0; seed < *engineSeeds; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			for _, c := range configs {
				runMetamorphic(t, uint64(seed), c.d, c.seg, c.idx, c.tail)
			}
		})
	}
}

func runMetamorphic(t *testing.T, seed uint64, d Durability, segBytes int64, idx, tail int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	clock := newFakeClock()
	opts := testOptions(vfs.NewMem(), clock)
	opts.IndexIntervalBytes, opts.TailCacheBytes = idx, tail
	e := mustOpen(t, opts)
	defer func() { _ = e.Close() }()
	top, err := e.CreateTopic("m", TopicConfig{Durability: d, SegmentBytes: segBytes, MaxBatchBytes: 2048, RetentionBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := top.Partition(0)
	m := &model{epoch: 1}
	ctx := context.Background()
	where := func(op int, what string) string {
		return fmt.Sprintf("%s seg=%d idx=%d tail=%d op %d (%s)", d, segBytes, idx, tail, op, what)
	}
	for op := 0; op < 300; op++ {
		switch k := rng.IntN(100); {
		case k < 55: // append
			n := 1 + rng.IntN(8)
			var b record.BatchBuilder
			vals := make([]readRec, n)
			for i := range vals {
				v := fmt.Sprintf("%d-%d-%s", op, i, string(make([]byte, rng.IntN(200))))
				ts := int64(rng.IntN(1000))
				b.Append(record.Record{Timestamp: ts, Value: []byte(v)})
				vals[i] = readRec{off: m.next + uint64(i), ts: ts, value: v}
			}
			batch, err := b.Build(record.Compression(rng.IntN(3)))
			if err != nil {
				t.Fatal(err)
			}
			r, err := p.Append(batch)
			if err != nil || r.Base != m.next || r.Last != m.next+uint64(n-1) {
				t.Fatalf("%s: append got %+v, %v; want base %d", where(op, "append"), r, err, m.next)
			}
			if err := p.WaitDurable(ctx, r.Last); err != nil {
				t.Fatal(err)
			}
			m.recs = append(m.recs, vals...)
			m.next += uint64(n)
		case k < 80: // read from a random valid offset
			from := m.start + uint64(rng.IntN(int(m.next-m.start)+1))
			if rng.IntN(8) == 0 {
				p.DropTailCache()
			}
			got, _ := readAll(t, p, from)
			want := m.readFrom(from)
			if len(got) != len(want) {
				t.Fatalf("%s: read from %d got %d records, want %d", where(op, "read"), from, len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: record %d: got %+v want %+v", where(op, "read"), i, got[i], want[i])
				}
			}
		case k < 85: // read below the start
			if m.start > 0 {
				_, err := p.PlanRead(m.start-1, 100)
				var oor *OutOfRangeError
				if !errors.As(err, &oor) || oor.Start != m.start {
					t.Fatalf("%s: %v", where(op, "read below start"), err)
				}
			}
		case k < 88: // purge
			st, err := p.Purge()
			if err != nil {
				t.Fatal(err)
			}
			m.start, m.epoch = m.next, m.epoch+1
			m.recs = nil
			if st.LogStart != m.start || uint64(st.History) != m.epoch {
				t.Fatalf("%s: purge state %+v, model start %d epoch %d", where(op, "purge"), st, m.start, m.epoch)
			}
		case k < 94: // retention: the engine decides what goes, the model follows
			if _, err := p.EnforceRetention(clock.Now(), NoRetentionFloor); err != nil {
				t.Fatal(err)
			}
			st := p.State()
			if st.LogStart < m.start {
				t.Fatalf("%s: start went back from %d to %d", where(op, "retention"), m.start, st.LogStart)
			}
			m.start = st.LogStart
			m.recs = m.readFrom(m.start)
		default: // clean restart
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = mustOpen(t, opts)
			top, _ = e.Topic("m")
			p, _ = top.Partition(0)
		}
		clock.Advance(time.Second)
		st := p.State()
		if st.LogStart != m.start || st.HighWatermark != m.next || uint64(st.History) != m.epoch {
			t.Fatalf("%s: state %+v, model start %d hw %d epoch %d", where(op, "state"), st, m.start, m.next, m.epoch)
		}
	}
}
