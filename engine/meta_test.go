package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ledgemq/ledge/fence"
)

func TestMetaBatchOrderedAndDurable(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := testOptions(fs, newFakeClock())
	e := mustOpen(t, opts)
	top, _ := e.CreateTopic("t", TopicConfig{})
	p, _ := top.Partition(0)
	node := NodeSpace("tokens")
	ctx := context.Background()
	var last MetaSeq
	for i := 0; i < 5; i++ {
		m := e.NewMetaBatch()
		m.Put(node, []byte(fmt.Sprint("k", i)), []byte(fmt.Sprint("v", i)))
		m.SetBookmark(p, "c", Bookmark{Offset: uint64(i), History: 1})
		m.Put(p.Space("sessions"), []byte("c"), []byte{byte(i)})
		seq, err := m.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if seq <= last {
			t.Fatalf("commit order %d after %d", seq, last)
		}
		last = seq
	}
	// Not yet synced: a power loss may lose them. Synced: it may not.
	if err := e.SyncMeta(ctx, last); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = e.Close()
	opts.FS = crashed
	e = mustOpen(t, opts)
	defer e.Close()
	top, _ = e.Topic("t")
	p, _ = top.Partition(0)
	if bm, ok, err := p.Bookmark("c"); err != nil || !ok || bm.Offset != 4 || bm.History != 1 {
		t.Fatalf("bookmark after crash: %+v %v %v", bm, ok, err)
	}
	var keys []string
	if err := e.ScanMeta(node, func(k, v []byte) error {
		keys = append(keys, string(k)+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keys) != "[k0=v0 k1=v1 k2=v2 k3=v3 k4=v4]" {
		t.Fatalf("node space after crash: %v", keys)
	}
	if v, ok, _ := e.GetMeta(p.Space("sessions"), []byte("c")); !ok || v[0] != 4 {
		t.Fatalf("partition space after crash: %v %v", v, ok)
	}
}

// TestProducerStateRecovery: producer state survives a crash (snapshot plus
// the batch headers after it), and forgets batches lost by a lossy one.
func TestProducerStateRecovery(t *testing.T) {
	for _, d := range []Durability{DurabilityAlways, DurabilityNone} {
		t.Run(d.String(), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			opts := testOptions(fs, newFakeClock())
			e := mustOpen(t, opts)
			top, _ := e.CreateTopic("t", TopicConfig{Durability: d, SegmentBytes: 4096, MaxBatchBytes: 1024})
			p, _ := top.Partition(0)
			var lastBase uint64
			for seq := 0; seq < 200; seq += 2 {
				b := makeBatch(t, "p", 2, 0)
				setProducer(b, 5, 3, int32(seq))
				lastBase = appendWait(t, p, b).Base
			}
			if _, err := p.Purge(); err != nil { // snapshots producer state
				t.Fatal(err)
			}
			for seq := 200; seq < 260; seq += 2 {
				b := makeBatch(t, "p", 2, 0)
				setProducer(b, 5, 3, int32(seq))
				lastBase = appendWait(t, p, b).Base
			}
			if d == DurabilityNone {
				// Make it durable, so the crash loses nothing.
				if _, err := p.Purge(); err != nil {
					t.Fatal(err)
				}
			}
			live, _ := p.ProducerState(5)
			crashed := fs.CrashClone(vfs.CrashCloneCfg{})
			_ = e.Close()
			opts.FS = crashed
			e = mustOpen(t, opts)
			defer e.Close()
			top, _ = e.Topic("t")
			p, _ = top.Partition(0)
			got, ok := p.ProducerState(5)
			if !ok || got.Epoch != fence.ProducerEpoch(3) || got.Len() != live.Len() || got.Batch(0) != live.Batch(0) {
				t.Fatalf("producer state after crash: %+v, before %+v", got, live)
			}
			if got.Batch(0).Base != lastBase || got.Batch(0).FirstSeq != 258 {
				t.Fatalf("newest batch %+v, want base %d seq 258", got.Batch(0), lastBase)
			}
		})
	}
}
