package plugins

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/ledgemq/ledge/plugins/abi"
	"github.com/ledgemq/ledge/record"
)

// benchRecords is the benchmark input: n records of 100-byte JSON values,
// half of them with "site":"lyon".
func benchBatch(b testing.TB, n int) []byte {
	var bb record.BatchBuilder
	for i := 0; i < n; i++ {
		site := "lyon"
		if i%2 == 1 {
			site = "oslo"
		}
		v := fmt.Sprintf(`{"site":"%s","device":"sensor-%06d","temp":%d.%d,"hum":%02d,"pad":"`, site, i, 10+i%20, i%10, 30+i%60)
		v += string(make([]byte, 0)) + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"[:98-len(v)] + `"}`
		if len(v) != 100 {
			b.Fatalf("value of %d bytes", len(v))
		}
		bb.Append(record.Record{Timestamp: int64(i), Value: []byte(v)})
	}
	batch, err := bb.Build(record.CompressionNone)
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

const benchRecordsPerPoll = 1000

// reportRecords reports throughput per record, by the wall clock and by
// the process's CPU time since cpu0 (steadier on a shared machine).
func reportRecords(b *testing.B, records int, cpu0 time.Duration) {
	n := float64(records) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/record")
	if cpu := processCPU() - cpu0; cpu > 0 && cpu0 > 0 {
		b.ReportMetric(n/cpu.Seconds(), "records/cpu-s")
	}
}

// BenchmarkFilter compares, on 100-byte records, a native Go filter with
// the JSON-field example running as WebAssembly under the host's limits:
// matching inside the guest, through the per-record host helper, and
// through the batch host helper. One iteration is one poll of 1000
// records.
func BenchmarkFilter(b *testing.B) {
	batch := benchBatch(b, benchRecordsPerPoll)
	b.Run("native-go", func(b *testing.B) {
		var it record.RecordIterator
		keep := abi.NewBitmap(benchRecordsPerPoll)
		want := []byte("lyon")
		cpu0 := processCPU()
		for b.Loop() {
			if err := it.Reset(batch, 0); err != nil {
				b.Fatal(err)
			}
			i := 0
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				raw, found := abi.JSONField(r.Value, "site")
				keep.Set(i, found && abi.JSONValueEquals(raw, want))
				i++
			}
		}
		if keep.Count() != benchRecordsPerPoll/2 {
			b.Fatalf("kept %d", keep.Count())
		}
		reportRecords(b, benchRecordsPerPoll, cpu0)
	})
	h := newTestHost(b, Config{Now: time.Now, CallTimeout: time.Second})
	mustAdd(b, h, "json", KindFilter, goModule(b, jsonFilterPkg))
	v := testView(b, 0, batch)
	for _, mode := range []string{"guest", "record", "native"} {
		name := map[string]string{"guest": "wasm-in-guest", "record": "wasm-helper-per-record", "native": "wasm-helper-batch"}[mode]
		b.Run(name, func(b *testing.B) {
			p := Params{"field": "site", "equals": "lyon", "match": mode}
			ctx := context.Background()
			var keep Bitmap
			var err error
			cpu0 := processCPU()
			for b.Loop() {
				if keep, err = h.Filter(ctx, "json", p, v); err != nil {
					b.Fatal(err)
				}
			}
			if keep.Count() != benchRecordsPerPoll/2 {
				b.Fatalf("kept %d", keep.Count())
			}
			reportRecords(b, benchRecordsPerPoll, cpu0)
		})
	}
	// The whole path a filtered poll takes on the node: decode the stored
	// batch into a view, filter, build the reply batch.
	b.Run("view-filter-build", func(b *testing.B) {
		p := Params{"field": "site", "equals": "lyon", "match": "native"}
		ctx := context.Background()
		cpu0 := processCPU()
		for b.Loop() {
			v, err := NewView(PollResult{Batches: [][]byte{batch}})
			if err != nil {
				b.Fatal(err)
			}
			keep, err := h.Filter(ctx, "json", p, v)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := v.Filtered(keep, record.CompressionNone, 0); err != nil {
				b.Fatal(err)
			}
		}
		reportRecords(b, benchRecordsPerPoll, cpu0)
	})
}

// reportCPU reports the process's CPU time since cpu0 per op/per.
func reportCPU(b *testing.B, cpu0 time.Duration, per int, unit string) {
	if cpu := processCPU() - cpu0; cpu > 0 && cpu0 > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(per), unit)
	}
}

// BenchmarkInterruption measures the ways of keeping a guest
// interruptible (RATIONALE.md): nothing (unsafe: a spinning guest cannot
// be stopped and freezes the process at the next garbage collection),
// wazero's WithCloseOnContextDone, and the host's metering. It uses raw
// runtimes, outside the Host.
func BenchmarkInterruption(b *testing.B) {
	spinWasm := goModule(b, "./testdata/spin")
	jsonWasm := goModule(b, jsonFilterPkg)
	v := testView(b, 0, benchBatch(b, benchRecordsPerPoll))
	for _, mode := range []string{"none", "close-on-context-done", "meter"} {
		b.Run(mode+"/call", func(b *testing.B) {
			rt, mod := rawInstance(b, mode, spinWasm)
			defer rt.Close(context.Background())
			fn := mod.ExportedFunction("noop")
			cpu0 := processCPU()
			for b.Loop() {
				ctx, cancel := rawCallContext(mode)
				if _, err := fn.Call(ctx); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
			reportCPU(b, cpu0, 1, "cpu-ns/call")
		})
		b.Run(mode+"/loop-iteration", func(b *testing.B) {
			rt, mod := rawInstance(b, mode, spinWasm)
			defer rt.Close(context.Background())
			fn := mod.ExportedFunction("spin")
			const iterations = 1 << 20
			cpu0 := processCPU()
			for b.Loop() {
				ctx, cancel := rawCallContext(mode)
				if _, err := fn.Call(ctx, iterations); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/iterations, "ns/iteration")
			reportCPU(b, cpu0, iterations, "cpu-ns/iteration")
		})
		b.Run(mode+"/json-in-guest", func(b *testing.B) {
			rt, mod := rawInstance(b, mode, jsonWasm)
			defer rt.Close(context.Background())
			call := rawABI(b, mod, Params{"field": "site", "equals": "lyon", "match": "guest"})
			cpu0 := processCPU()
			for b.Loop() {
				ctx, cancel := rawCallContext(mode)
				if n := call(ctx, v); n != benchRecordsPerPoll/2 {
					b.Fatalf("kept %d", n)
				}
				cancel()
			}
			reportRecords(b, benchRecordsPerPoll, cpu0)
		})
	}
}

// rawInstance instantiates wasm in a bare runtime configured for mode,
// with wazero's WASI and host functions that do nothing.
func rawInstance(b *testing.B, mode string, wasm []byte) (wazero.Runtime, api.Module) {
	b.Helper()
	ctx := context.Background()
	rc := wazero.NewRuntimeConfigCompiler().WithCompilationCache(mustCache(b)).
		WithCloseOnContextDone(mode == "close-on-context-done")
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	hb := rt.NewHostModuleBuilder(hostModuleName)
	for name, t := range hostFuncTypes {
		hb.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
			apiTypes(t.params), apiTypes(t.results)).Export(name)
	}
	if _, err := hb.Instantiate(ctx); err != nil {
		b.Fatal(err)
	}
	if mode == "meter" {
		_, err := rt.NewHostModuleBuilder(meterModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
				stack[0] = meterSlice
			}), nil, []api.ValueType{api.ValueTypeI64}).Export(meterYield).Instantiate(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var merr error
		if wasm, _, merr = meter(wasm, allowImport); merr != nil {
			b.Fatal(merr)
		}
	}
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize"))
	if err != nil {
		b.Fatal(err)
	}
	return rt, mod
}

var benchCache wazero.CompilationCache

func mustCache(b *testing.B) wazero.CompilationCache {
	if benchCache == nil {
		var err error
		if benchCache, err = wazero.NewCompilationCacheWithDir(testModules.cacheDir); err != nil {
			b.Fatal(err)
		}
	}
	return benchCache
}

// rawCallContext is the context of one call: with close-on-context-done
// it carries the deadline wazero watches, as a host would set it.
func rawCallContext(mode string) (context.Context, context.CancelFunc) {
	if mode == "close-on-context-done" {
		return context.WithTimeout(context.Background(), time.Second)
	}
	return context.Background(), func() {}
}

// rawABI initializes a raw instance as a filter and returns a function
// running one filter call, returning the number of records kept.
func rawABI(b *testing.B, mod api.Module, p Params) func(context.Context, *View) int {
	b.Helper()
	ctx := context.Background()
	enc := mustEncode(b, p)
	buf, err := mod.ExportedFunction(abi.ExportBuffer).Call(ctx, 16<<20)
	if err != nil {
		b.Fatal(err)
	}
	ptr := uint32(buf[0])
	mod.Memory().Write(ptr, enc)
	if r, err := mod.ExportedFunction(abi.ExportInit).Call(ctx, abi.KindFilter, uint64(ptr), uint64(len(enc))); err != nil || int32(r[0]) != 0 {
		b.Fatal(r, err)
	}
	filter := mod.ExportedFunction(abi.ExportFilter)
	return func(ctx context.Context, v *View) int {
		mod.Memory().Write(ptr, v.region)
		r, err := filter.Call(ctx, uint64(ptr), uint64(len(v.region)))
		if err != nil {
			b.Fatal(err)
		}
		off, _ := answerArea(v)
		ans, _ := mod.Memory().Read(ptr+off, uint32(r[0]))
		m, err := abi.ParseBitmap(ans, v.Len())
		if err != nil {
			b.Fatal(err)
		}
		return m.Count()
	}
}

// BenchmarkProcessRoundTrip measures the transport cost of the other way
// to stop a runaway guest: running plugins in a child process the node can
// kill. A call is one request and one reply over pipes; the child only
// echoes, so this is a lower bound (no shared memory setup, no wasm).
func BenchmarkProcessRoundTrip(b *testing.B) {
	for _, size := range []int{64, 150 << 10} { // an empty call; a 1000-record view
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			self, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command(self, "-test.run=^TestEchoChild$")
			cmd.Env = append(os.Environ(), "LEDGE_PLUGINS_ECHO_CHILD=1")
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { in.Close(); cmd.Wait() }()
			msg := make([]byte, size)
			r := bufio.NewReaderSize(out, size)
			reply := make([]byte, size)
			for b.Loop() {
				if _, err := in.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(r, reply); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEchoChild is the child of BenchmarkProcessRoundTrip: it copies
// standard input to standard output. It does nothing in a normal run.
func TestEchoChild(t *testing.T) {
	if os.Getenv("LEDGE_PLUGINS_ECHO_CHILD") != "1" {
		t.Skip("the child of BenchmarkProcessRoundTrip")
	}
	io.Copy(os.Stdout, os.Stdin)
	os.Exit(0)
}

func BenchmarkNewView(b *testing.B) {
	batch := benchBatch(b, benchRecordsPerPoll)
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := NewView(PollResult{Batches: [][]byte{batch}}); err != nil {
			b.Fatal(err)
		}
	}
	reportRecords(b, benchRecordsPerPoll, cpu0)
}
