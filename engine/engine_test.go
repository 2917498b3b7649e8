package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestAppendReadReopen(t *testing.T) {
	for _, d := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		t.Run(d.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			clock := newFakeClock()
			e := mustOpen(t, testOptions(fs, clock))
			top, err := e.CreateTopic("orders", TopicConfig{Partitions: 2, Durability: d, SegmentBytes: 4096, MaxBatchBytes: 1024})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := top.Partition(1)
			var want []string
			for i := 0; i < 50; i++ {
				r := appendWait(t, p, makeBatch(t, fmt.Sprint("b", i), 3, int64(i)))
				if r.Base != uint64(3*i) || r.Last != uint64(3*i+2) {
					t.Fatalf("batch %d got offsets %+v", i, r)
				}
				for j := 0; j < 3; j++ {
					want = append(want, fmt.Sprintf("b%d-%d", i, j))
				}
			}
			check := func(p *Partition) {
				t.Helper()
				got, next := readAll(t, p, 0)
				if len(got) != len(want) || next != 150 {
					t.Fatalf("read %d records up to %d, want %d up to 150", len(got), next, len(want))
				}
				for i, r := range got {
					if r.off != uint64(i) || r.value != want[i] {
						t.Fatalf("record %d: %+v, want %q", i, r, want[i])
					}
				}
			}
			check(p)
			p.DropTailCache()
			check(p)
			if n := len(p.segs); n < 2 {
				t.Fatalf("expected rolled segments, have %d", n)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = mustOpen(t, testOptions(fs, clock))
			defer e.Close()
			top, err = e.Topic("orders")
			if err != nil {
				t.Fatal(err)
			}
			p, _ = top.Partition(1)
			check(p)
			st := p.State()
			if st.HighWatermark != 150 || st.History != 1 || st.LogStart != 0 {
				t.Fatalf("after clean restart: %+v", st)
			}
			r := appendWait(t, p, makeBatch(t, "after", 1, 0))
			if r.Base != 150 {
				t.Fatalf("clean restart gapped: next offset %d", r.Base)
			}
		})
	}
}

func TestOutOfRangeAndUnknown(t *testing.T) {
	e := mustOpen(t, testOptions(vfs.NewMem(), newFakeClock()))
	defer e.Close()
	if _, err := e.Topic("nope"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	top, _ := e.CreateTopic("t", TopicConfig{})
	if _, err := e.CreateTopic("t", TopicConfig{}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate: %v", err)
	}
	p, _ := top.Partition(0)
	appendWait(t, p, makeBatch(t, "x", 2, 0))
	_, err := p.PlanRead(5, 100)
	var oor *OutOfRangeError
	if !errors.As(err, &oor) || oor.HW != 2 {
		t.Fatalf("read past the end: %v", err)
	}
	if _, err := p.Append([]byte("garbage")); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("garbage append: %v", err)
	}
}
