package plugins

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// meterRuntime instantiates a metered module with a yield that counts
// visits and grants fuel.
type meterRuntime struct {
	rt     wazero.Runtime
	yields int
}

func newMeterRuntime(t *testing.T) *meterRuntime {
	t.Helper()
	ctx := context.Background()
	mr := &meterRuntime{rt: wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())}
	t.Cleanup(func() { mr.rt.Close(ctx) })
	_, err := mr.rt.NewHostModuleBuilder(meterModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			mr.yields++
			stack[0] = meterSlice
		}), nil, []api.ValueType{api.ValueTypeI64}).Export(meterYield).Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return mr
}

func (mr *meterRuntime) instantiate(t *testing.T, wasm []byte) api.Module {
	t.Helper()
	ctx := context.Background()
	m, err := mr.rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func allowAll(string, string, funcType) error { return nil }

// Metering renumbers functions (calls, exports, the table's elements, the
// start function) and keeps behaviour: the same module metered or not
// computes the same results.
func TestMeterKeepsBehaviour(t *testing.T) {
	// f0 import env.add1; f1 start: store 42 at 0; f2 "twice": call f3
	// twice through the table; f3 adds one via the import; f4 "loop":
	// counts to n.
	table := []byte{}
	table = append(table, 1, 0x70, 0, 1)       // one funcref table, min 1
	elems := []byte{1, 0, 0x41, 0, 0x0B, 1, 3} // active, offset 0: [f3]
	raw := &tModule{memPages: 1, exportMem: true, startIndex: 1}
	raw.imports = []tImport{{"env", "add1", sig(tI32)(tI32)}}
	raw.funcs = []tFunc{
		{typ: sig()(), body: cat(i32c(0), i32c(42), []byte{opI32Store, 2, 0})},
		{typ: sig(tI32)(tI32), export: "twice", body: cat(localGet(0), i32c(0), []byte{0x11, 0, 0}, i32c(0), []byte{0x11, 0, 0})},
		{typ: sig(tI32)(tI32), body: cat(localGet(0), []byte{opCall, 0})},
		{typ: sig(tI32)(tI32), export: "loop", locals: []byte{tI32}, body: cat(
			[]byte{0x02, blockEmpty, opLoop, blockEmpty},
			localGet(1), localGet(0), []byte{0x4E, opBrIf, 1}, // i32.ge_s; br_if 1
			localGet(1), i32c(1), []byte{opI32Add, 0x21, 1, opBr, 0, opEnd, opEnd},
			localGet(1))},
	}
	wasm := insertSections(raw.encode(), table, elems)
	metered, info, err := meter(wasm, allowAll)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.imports) != 1 || info.exports["twice"].typ.String() != "(i32) -> (i32)" {
		t.Fatalf("info: %+v", info)
	}
	ctx := context.Background()
	run := func(bin []byte) (twice, loop uint64, yields int, mem uint32) {
		mr := newMeterRuntime(t)
		_, err := mr.rt.NewHostModuleBuilder("env").NewFunctionBuilder().
			WithFunc(func(x int32) int32 { return x + 1 }).Export("add1").Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := mr.instantiate(t, bin)
		r, err := m.ExportedFunction("twice").Call(ctx, 5)
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.ExportedFunction("loop").Call(ctx, 100000)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := m.Memory().ReadUint32Le(0)
		return r[0], l[0], mr.yields, v
	}
	t1, l1, y1, m1 := run(wasm)
	t2, l2, y2, m2 := run(metered)
	if t1 != t2 || l1 != l2 || m1 != m2 || t2 != 7 || l2 != 100000 || m2 != 42 {
		t.Errorf("plain (%d %d %d) metered (%d %d %d)", t1, l1, m1, t2, l2, m2)
	}
	if y1 != 0 || y2 < 100000/meterSlice || y2 > 100000/meterSlice+1 {
		t.Errorf("yields: plain %d, metered %d for 100000 iterations", y1, y2)
	}
}

// insertSections adds a table section and an element section to a module
// built by tModule.
func insertSections(wasm, table, elems []byte) []byte {
	out := append([]byte(nil), wasm[:8]...)
	r := &wasmReader{b: wasm, pos: 8}
	for !r.done() {
		id := r.byte()
		content := r.bytes(uint64(r.u32()))
		if id == secMemory {
			out = appendSection(out, secTable, table)
		}
		if id == secCode {
			out = appendSection(out, secElement, elems)
		}
		out = appendSection(out, id, content)
	}
	return out
}

// Bulk instructions are charged by length: a large memory.fill yields at
// once, where the same count of small fills would not.
func TestMeterChargesBulk(t *testing.T) {
	fill := func(n int32) []byte {
		m := &tModule{memPages: 16, exportMem: true, startIndex: -1}
		m.funcs = []tFunc{{typ: sig()(), export: "f", body: cat(i32c(0), i32c(0), i32c(n), []byte{0xFC, 11, 0})}}
		metered, _, err := meter(m.encode(), allowAll)
		if err != nil {
			t.Fatal(err)
		}
		return metered
	}
	const calls = 2000
	for _, tc := range []struct {
		n         int32
		minYields int
		maxYields int
	}{
		{16, 0, 0}, // one unit per call (the function entry): no yield within a slice
		// 257 units per 64 KiB fill: a yield every ceil(slice/257) calls
		// (a yield grants a fresh slice, forgiving the overdraft).
		{65536, calls / ((meterSlice + 256) / 257), calls/((meterSlice+256)/257) + 1},
	} {
		mr := newMeterRuntime(t)
		m := mr.instantiate(t, fill(tc.n))
		for i := 0; i < calls; i++ {
			if _, err := m.ExportedFunction("f").Call(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if mr.yields < tc.minYields || mr.yields > tc.maxYields {
			t.Errorf("%d fills of %d bytes: %d yields, want %d to %d", calls, tc.n, mr.yields, tc.minYields, tc.maxYields)
		}
	}
}

func TestMeterKeepsFunctionNames(t *testing.T) {
	wasm := goModule(t, hostilePkg)
	metered, _, err := meter(wasm, allowAll)
	if err != nil {
		t.Fatal(err)
	}
	// The hostile plugin's panic trace names Go functions: the name
	// section was renumbered along with the functions.
	h := newTestHost(t, Config{})
	mustAdd(t, h, "h", KindFilter, wasm)
	_, err = h.Filter(context.Background(), "h", Params{"do": "panic"}, testView(t, 0, batchOf(t, 0, values("a")...)))
	if !strings.Contains(err.Error(), "main.init.0.func1.1") {
		t.Errorf("trap without the guest's function names: %v", err)
	}
	if bytes.Contains(metered, []byte("producers")) {
		t.Errorf("custom sections other than names survived")
	}
}

func TestMeterRefuses(t *testing.T) {
	valid := abiModule(i32c(0), nil)
	withBody := func(body []byte) []byte {
		m := abiModule(cat(body, i32c(0)), nil)
		return m.encode()
	}
	for _, tc := range []struct {
		name string
		wasm []byte
		says string
	}{
		{"atomics", withBody([]byte{0xFE, 0x03, 0x00}), "instruction 0xfe is not supported"},
		{"tail call", withBody([]byte{0x12, 0x00}), "instruction 0x12 is not supported"},
		{"multi-memory load", withBody(cat(i32c(0), []byte{opI32Load, 0x42, 0, 0, opDrop})), "multiple memories"},
		{"bad block type", withBody([]byte{0x02, 0x7F - 0x40, opEnd}), "block type"},
		{"trailing code", append(valid.encode(), 0x0B), "truncated"},
		{"version 2 binary", append([]byte("\x00asm\x02\x00\x00\x00"), valid.encode()[8:]...), "binary format version"},
	} {
		_, _, err := meter(tc.wasm, allowAll)
		if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.says)
		}
	}
}

// Arbitrary bytes never make the rewrite panic, and what it accepts from a
// valid module stays valid.
func FuzzMeter(f *testing.F) {
	f.Add(abiModule(i32c(0), nil).encode())
	f.Add(abiModule(cat(loopForever, i32c(0)), nil).encode())
	f.Add(slowModule()[:4096])
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, _, err := meter(wasm, allowAll)
		if err != nil {
			return
		}
		if _, _, err := meter(out, func(module, name string, typ funcType) error { return nil }); err != nil &&
			!strings.Contains(err.Error(), "reserved") {
			t.Fatalf("the metered module does not parse again: %v", err)
		}
	})
}

// Adjacent data segments are merged (a Go module has tens of thousands),
// and memory starts with the same bytes as without merging: gaps read as
// zeros, a segment over an earlier one still overwrites it, and a gap
// that holds an earlier segment's bytes is not filled.
func TestMeterMergesDataSegments(t *testing.T) {
	raw := &tModule{memPages: 1, exportMem: true, startIndex: -1}
	raw.data = []tData{
		{0, []byte("abc")}, {3, []byte("def")}, {70, []byte("64 bytes on")}, // one run
		{500, []byte("far")},
		{2, []byte("XY")}, // over the first run: applied after it
		{300, []byte("AAAA")},
		{250, []byte("bb")}, {290, []byte("cc")}, // one run
		{320, []byte("dd")}, {322, []byte("ee")}, // one run: AAAA is in the gap before
		{65000, []byte("last")},
	}
	wasm := raw.encode()
	metered, _, err := meter(wasm, allowAll)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dataSegments(t, metered), 7; got != want {
		t.Errorf("%d data segments after metering, want %d (from %d)", got, want, len(raw.data))
	}
	mr := newMeterRuntime(t)
	plain, _ := mr.instantiate(t, wasm).Memory().Read(0, 65536)
	merged, _ := mr.instantiate(t, metered).Memory().Read(0, 65536)
	if !bytes.Equal(plain, merged) {
		for i := range plain {
			if plain[i] != merged[i] {
				t.Fatalf("memory differs from byte %d: %q merged, %q as built", i, merged[i:i+16], plain[i:i+16])
			}
		}
	}
	if !bytes.Equal(plain[:8], []byte("abXYef\x00\x00")) {
		t.Fatalf("memory starts with %q", plain[:8])
	}

	for _, v := range []int32{0, 1, 63, 64, -1, -64, -65, 1 << 30, math.MaxInt32, math.MinInt32} {
		if got := decodeS32(appendS64(nil, int64(v))); got != v {
			t.Errorf("decodeS32(appendS64(%d)) = %d", v, got)
		}
	}
}

// dataSegments counts the segments of wasm's data section.
func dataSegments(t *testing.T, wasm []byte) int {
	t.Helper()
	r := &wasmReader{b: wasm, pos: 8, what: "module"}
	for !r.done() {
		id, size := r.byte(), r.u32()
		content := r.bytes(uint64(size))
		if id == secData {
			return int((&wasmReader{b: content, what: "data"}).u32())
		}
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return 0
}
