//go:build unix

package transform

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgemq/ledge/engine"
	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/group"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/record"
)

// BenchmarkMapTransformVsFilter moves 10,000 records of 1 KiB (ten
// stored batches of 1,000) through the two plugin paths of a node, over
// the storage engine as a node opens it: a temporary directory on the
// real file system, topics of durability none (appends go to the page
// cache, nothing is fsynced), the engine's metadata store for offsets
// and state. Both paths read the same input log:
//
//   - filter: the poll path with a filter (the JSON example, host
//     matcher): poll, view, plugin call, node-built batch of the kept
//     records (half of them);
//   - transform-*: a transform runner: poll, view, plugin call, output
//     batch, pending write, append to the output topic, promotion; with
//     the test transforms passing every record through (pass), wrapping
//     each value in an envelope (envelope) and upper-casing every value
//     (upper);
//   - transform-pass-dropped: the pass-through with an output that lets
//     every batch go instead of appending it: the runner without the
//     output log.
//
// Each reports input records per second and per CPU second of the whole
// process (the plugin's threads, the engine's flusher and the garbage
// collector included; on a shared machine the second is the steadier),
// and a transform its records per CPU second as a fraction of the
// filter's in the same run (x-filter). Run briefly:
//
//	go test ./node/transform -run '^$' -bench MapTransformVsFilter -benchtime 3x
func BenchmarkMapTransformVsFilter(b *testing.B) {
	const (
		batches   = 10
		perBatch  = 1000
		recordLen = 1024
	)
	w := newEngineWorld(b, b.TempDir(), engine.DurabilityNone)
	defer w.mgr.Close()
	w.createTopic("in", 1)
	w.createTopic("out", 1)
	pad := strings.Repeat("x", recordLen)
	for range batches {
		var bb record.BatchBuilder
		for j := range perBatch {
			site := "lyon"
			if j%2 == 1 {
				site = "oslo"
			}
			v := `{"site":"` + site + `","pad":"` + pad[:recordLen-len(`{"site":"lyon","pad":""}`)] + `"}`
			bb.Append(record.Record{Timestamp: int64(j), Key: []byte("sensor"), Value: []byte(v)})
		}
		batch, err := bb.Build(record.CompressionNone)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.topics["in"].owners[0].Produce(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	total := batches * perBatch
	ctx := context.Background()
	h := benchHost(b)
	in := w.topics["in"].owners[0]
	hw := in.State().HighWatermark

	var filterRate float64 // records per CPU second of the filter case
	b.Run("filter", func(b *testing.B) {
		params := plugins.Params{"field": "site", "equals": "lyon", "match": "native"}
		cpu0 := processCPU()
		for b.Loop() {
			for off := uint64(0); off < hw; {
				res, err := in.Poll(ctx, owner.PollRequest{From: owner.FromOffset, Offset: off, MaxBytes: pollBytes})
				if err != nil {
					b.Fatal(err)
				}
				v, err := plugins.NewView(plugins.PollResult{From: off, Next: res.Next, Batches: res.Batches})
				if err != nil {
					b.Fatal(err)
				}
				keep, err := h.Filter(ctx, "json", params, v)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := v.Filtered(keep, record.CompressionNone, 4<<20); err != nil {
					b.Fatal(err)
				}
				v.Release()
				res.Release()
				off = res.Next
			}
		}
		filterRate = reportRecords(b, total, cpu0)
	})
	n := 0
	for _, c := range []struct {
		name, plugin, mode string
		drop               bool
	}{
		{"pass", "map", "pass", false}, {"envelope", "envelope", "", false}, {"upper", "map", "map", false},
		{"pass-dropped", "map", "pass", true},
	} {
		b.Run("transform-"+c.name, func(b *testing.B) {
			cpu0 := processCPU()
			for b.Loop() {
				n++
				spec := Spec{Name: fmt.Sprintf("bench-%d", n), Plugin: c.plugin, From: "in", To: "out",
					FromID: w.topics["in"].id, ToID: w.topics["out"].id}
				asg, err := w.groups.Join(ctx, group.JoinRequest{Group: spec.Group(), Member: "m", Topics: []string{"in"}})
				if err != nil {
					b.Fatal(err)
				}
				var out Output = w.topics["out"].owners[0]
				if c.drop {
					out = droppedOutput{out}
				}
				r := &partRunner{spec: spec, params: plugins.Params{"mode": c.mode}, in: in, out: out,
					maxBatch: 4 << 20, plugin: h, producers: w.prods, stats: &partStats{now: time.Now},
					consumer: owner.Consumer{Name: spec.Group(), Member: asg.MemberID, MemberEpoch: fence.MemberEpoch(asg.Assignment[0].AssignmentEpoch)}}
				if err := r.recover(ctx); err != nil {
					b.Fatal(err)
				}
				for r.committed < hw {
					if err := r.step(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if rate := reportRecords(b, total, cpu0); rate > 0 && filterRate > 0 {
				b.ReportMetric(rate/filterRate, "x-filter")
			}
		})
	}
}

// benchHost is a plugin host with the JSON filter example as "json" and
// the host's map transform as "map", built for wasip1 (the Go build cache
// and a compilation cache in the user's cache directory keep reruns fast).
func benchHost(b *testing.B) *plugins.Host {
	b.Helper()
	cache := ""
	if d, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(d, "ledge", "transform-bench-wazero")
	}
	h, err := plugins.NewHost(context.Background(), plugins.Config{CacheDir: cache, CallTimeout: 10 * time.Second,
		CompileTimeout: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	for _, m := range []struct {
		name string
		kind plugins.Kind
		pkg  string
	}{
		{"json", plugins.KindFilter, "../../sdk/plugin/examples/jsonfilter"},
		{"map", plugins.KindTransform, "../../plugins/testdata/maptransform"},
		{"envelope", plugins.KindTransform, "./testdata/envelope"},
	} {
		out := filepath.Join(b.TempDir(), m.name+".wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, m.pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go build %s: %v\n%s", m.pkg, err, msg)
		}
		wasm, err := os.ReadFile(out)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Add(context.Background(), m.name, m.kind, wasm); err != nil {
			b.Fatal(err)
		}
	}
	return h
}

// reportRecords reports the records moved per second and per CPU second
// since cpu0, and returns the second (0: not measured).
func reportRecords(b *testing.B, perOp int, cpu0 time.Duration) float64 {
	n := float64(perOp * b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "records/s")
	cpu := processCPU() - cpu0
	if cpu <= 0 {
		return 0
	}
	b.ReportMetric(n/cpu.Seconds(), "records/cpu-s")
	return n / cpu.Seconds()
}

// processCPU is the CPU time the process used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// droppedOutput is an output partition that lets every batch go: the
// runner's cost without the output log's (see the benchmark). It hands
// each batch's memory back at once, as the engine does once it wrote it.
type droppedOutput struct{ Output }

func (droppedOutput) Produce(_ context.Context, batch []byte) (owner.ProduceResult, error) {
	_, err := record.ParseBatchHeader(batch)
	return owner.ProduceResult{}, err
}

func (d droppedOutput) OrderProduceOwned(ctx context.Context, batch []byte, release func()) (owner.ProduceResult, owner.Durable, error) {
	res, err := d.Produce(ctx, batch)
	release()
	return res, owner.Durable{}, err
}
