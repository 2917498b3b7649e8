package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestConcurrentAppendersKeepOffsetOrder: appenders racing on one
// partition (some of their batches written by the appender itself while
// the flusher is idle, others queued behind a busy one, small and large,
// across segment rolls and reservation raises) leave a log in which
// every record sits at the offset its append returned, for every policy,
// and a restart reads the same log.
func TestConcurrentAppendersKeepOffsetOrder(t *testing.T) {
	for _, d := range []Durability{DurabilityNone, DurabilityInterval, DurabilityAlways} {
		t.Run(d.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			opts := testOptions(fs, newFakeClock())
			e := mustOpen(t, opts)
			top, err := e.CreateTopic("t", TopicConfig{Durability: d, SegmentBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := top.Partition(0)
			const writers, appends = 4, 60
			want := make(map[uint64]string)
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range appends {
						n := 1
						if i%7 == 3 {
							n = 40 // a batch too large to be written by its appender
						}
						tag := fmt.Sprintf("w%d-%d", w, i)
						var batch []byte
						if n == 1 {
							batch = makeBatch(t, tag, 1, int64(i))
						} else {
							batch = makeBatch(t, tag+"-"+string(make([]byte, 200)), n, int64(i))
						}
						r, err := p.Append(batch)
						if err != nil {
							t.Errorf("append: %v", err)
							return
						}
						if i%5 == 0 {
							if err := p.WaitDurable(context.Background(), r.Last); err != nil {
								t.Errorf("wait: %v", err)
								return
							}
						}
						mu.Lock()
						for k := range n {
							want[r.Base+uint64(k)] = tag
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			hw := uint64(len(want))
			if err := p.WaitDurable(context.Background(), hw-1); err != nil {
				t.Fatal(err)
			}
			check := func(p *Partition) {
				t.Helper()
				recs, next := readAll(t, p, 0)
				if next != hw || uint64(len(recs)) != hw {
					t.Fatalf("read %d records up to %d, want %d", len(recs), next, hw)
				}
				for i, r := range recs {
					if r.off != uint64(i) {
						t.Fatalf("record %d at offset %d", i, r.off)
					}
					if tag := want[r.off]; len(r.value) < len(tag) || r.value[:len(tag)] != tag {
						t.Fatalf("offset %d holds %.20q, appended by %q", r.off, r.value, tag)
					}
				}
			}
			check(p)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = mustOpen(t, opts)
			defer e.Close()
			top, err = e.Topic("t")
			if err != nil {
				t.Fatal(err)
			}
			p, _ = top.Partition(0)
			check(p)
		})
	}
}

// BenchmarkAppendOneAtATime: one appender, one 1 KiB record per batch,
// each append waited for before the next (a producer sending one message
// at a time), under policy none on a real directory.
func BenchmarkAppendOneAtATime(b *testing.B) {
	e := benchEngine(b, b.TempDir(), 0)
	defer e.Close()
	top, err := e.CreateTopic("t", TopicConfig{Durability: DurabilityNone})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := top.Partition(0)
	tmpl := benchBatch(b, 1, 1024)
	ctx := context.Background()
	b.SetBytes(int64(len(tmpl)))
	b.ResetTimer()
	for b.Loop() {
		r, err := p.Append(append([]byte(nil), tmpl...))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.WaitDurable(ctx, r.Last); err != nil {
			b.Fatal(err)
		}
	}
}
