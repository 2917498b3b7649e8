package plugins

import (
	"bytes"
	"fmt"
)

// Metering: the host rewrites every module before compiling it so that
// compiled guest code returns to Go at bounded intervals. See RATIONALE.md
// ("Interrupting guests") for why and for the measurements.
//
// The rewrite adds one mutable i64 global, the fuel, and one imported
// function, the yield, (module meterModule, name meterYield, type
// () -> i64). At the start of every loop body, and of every function that
// does not reach a loop through straight-line code, it inserts:
//
//	fuel -= 1
//	if fuel <= 0 { fuel = yield() }
//
// Before every bulk memory or table instruction (memory.copy, memory.fill,
// memory.init, table.copy, table.fill, table.init, table.grow) it charges
// len/256 units and checks the same way, so one instruction cannot move
// gigabytes between checks. Any unbounded execution must loop or call, so a
// guest reaches the yield after at most meterSlice units of work; the host's
// yield checks the call's deadline and cancellation, and being Go code it
// is where the goroutine can be preempted (so a stop-the-world never waits
// on a guest for longer than one slice).
//
// The new import is appended after the module's own function imports, so
// the indices of the module's defined functions shift by one: calls,
// ref.func, exports, the start function, element segments and the name
// section are renumbered. The module's own code may not touch the new
// global: any global index at or past the module's own globals is refused.

const (
	// meterModule and meterYield name the import the rewrite adds. A
	// module may not import from meterModule itself.
	meterModule = "ledge:meter"
	meterYield  = "yield"

	// meterSlice is the fuel one yield grants: loop iterations and calls
	// (and 256-byte units of bulk memory work) between two visits to the
	// host. RATIONALE.md has the measurements behind the value.
	meterSlice = 20000

	// maxTableElements bounds every table, so table.grow and the bulk
	// table instructions are bounded too. Tables without a maximum get
	// this one.
	maxTableElements = 1 << 20
)

// moduleInfo is what the rewrite learned about a module.
type moduleInfo struct {
	imports []importInfo
	exports map[string]exportInfo
	memory  *memoryInfo // nil when the module defines no memory
}

type importInfo struct {
	module, name string
	typ          funcType
}

type exportInfo struct {
	kind byte     // 0 function, 1 table, 2 memory, 3 global
	typ  funcType // for functions
}

type memoryInfo struct {
	min, max uint32 // pages
	hasMax   bool
}

// meterer holds the state of one rewrite.
type meterer struct {
	types       []funcType
	funcTypes   []uint32 // type index of each defined function
	yieldType   uint32
	nImportFn   uint32
	nGlobals    uint32 // the module's own globals (imported + defined)
	fuelGlobal  uint32
	yieldFn     uint32
	info        *moduleInfo
	importAllow func(module, name string, typ funcType) error
}

// meter validates the structure of wasm, checks its imports with allow,
// and returns the rewritten module and what it learned. Errors wrap
// ErrInvalidModule or ErrImportRefused.
func meter(wasm []byte, allow func(module, name string, typ funcType) error) ([]byte, *moduleInfo, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, nil, fmt.Errorf("%w: not a WebAssembly binary (bad magic)", ErrInvalidModule)
	}
	if v := wasm[4:8]; !bytes.Equal(v, []byte{1, 0, 0, 0}) {
		return nil, nil, fmt.Errorf("%w: binary format version %x, want 1", ErrInvalidModule, v)
	}
	m := &meterer{info: &moduleInfo{exports: map[string]exportInfo{}}, importAllow: allow}

	sections := map[byte][]byte{}
	var names []byte
	last := -1
	r := &wasmReader{b: wasm, pos: 8, what: "module"}
	for !r.done() {
		id := r.byte()
		size := r.u32()
		content := r.bytes(uint64(size))
		if r.err != nil {
			break
		}
		if id == secCustom {
			cr := &wasmReader{b: content, what: "custom section"}
			if cr.name() == "name" && cr.err == nil {
				names = content[cr.pos:]
			}
			continue // other custom sections (DWARF, producers) are dropped
		}
		rank := bytes.IndexByte(sectionOrder[:], id)
		if rank < 0 {
			return nil, nil, fmt.Errorf("%w: %s (id %d) is not supported", ErrInvalidModule, sectionName(id), id)
		}
		if rank <= last {
			return nil, nil, fmt.Errorf("%w: %s section out of order or repeated", ErrInvalidModule, sectionName(id))
		}
		last = rank
		sections[id] = content
	}
	if r.err != nil {
		return nil, nil, fmt.Errorf("%w: %v (truncated or corrupt)", ErrInvalidModule, r.err)
	}

	out := append([]byte(nil), wasm[:8]...)
	var err error
	step := func(f func([]byte) ([]byte, error), content []byte) []byte {
		if err != nil {
			return nil
		}
		var b []byte
		b, err = f(content)
		return b
	}
	// The order matters: later sections need what earlier ones declared.
	types := step(m.typeSection, sections[secType])
	imports := step(m.importSection, sections[secImport])
	funcs := step(m.functionSection, sections[secFunction])
	tables := step(m.tableSection, sections[secTable])
	mems := step(m.memorySection, sections[secMemory])
	globals := step(m.globalSection, sections[secGlobal])
	exports := step(m.exportSection, sections[secExport])
	start := step(m.startSection, sections[secStart])
	elems := step(m.elementSection, sections[secElement])
	code := step(m.codeSection, sections[secCode])
	if err != nil {
		return nil, nil, err
	}
	data := sections[secData]
	if data != nil && sections[secDataCount] == nil {
		data = mergeData(data) // meter_data.go
	}
	for _, s := range []struct {
		id      byte
		content []byte
	}{
		{secType, types}, {secImport, imports}, {secFunction, funcs}, {secTable, tables},
		{secMemory, mems}, {secGlobal, globals}, {secExport, exports}, {secStart, start},
		{secElement, elems}, {secDataCount, sections[secDataCount]}, {secCode, code},
		{secData, data},
	} {
		if s.content != nil {
			out = appendSection(out, s.id, s.content)
		}
	}
	if names != nil {
		if n := m.nameSection(names); n != nil {
			out = appendSection(out, secCustom, append(appendName(nil, "name"), n...))
		}
	}
	return out, m.info, nil
}

// buildCheck returns the fuel check, using the i64 local tmp:
// fuel -= 1; if fuel <= 0 { fuel = yield() }.
func (m *meterer) buildCheck(tmp uint32) []byte {
	g := appendU32(nil, m.fuelGlobal)
	t := appendU32(nil, tmp)
	var b []byte
	b = append(append(b, 0x23), g...) // global.get fuel
	b = append(b, 0x42, 0x01, 0x7D)   // i64.const 1; i64.sub
	b = append(append(b, 0x22), t...) // local.tee tmp
	b = append(append(b, 0x24), g...) // global.set fuel
	b = append(append(b, 0x20), t...) // local.get tmp
	b = append(b, 0x42, 0x00, 0x57)   // i64.const 0; i64.le_s
	return append(b, m.yieldIf()...)
}

// yieldIf returns: if <condition on the stack> { fuel = yield() }.
func (m *meterer) yieldIf() []byte {
	g := appendU32(nil, m.fuelGlobal)
	var b []byte
	b = append(b, 0x04, 0x40)                 // if
	b = appendU32(append(b, 0x10), m.yieldFn) // call yield
	b = append(append(b, 0x24), g...)         // global.set fuel
	return append(b, 0x0B)                    // end
}

// bulkCharge returns the sequence inserted before a bulk instruction, whose
// length operand (i32) is on top of the stack: it keeps the length in the
// scratch local, charges len/256 units, and yields when the fuel runs out.
func (m *meterer) bulkCharge(scratch uint32) []byte {
	g := appendU32(nil, m.fuelGlobal)
	s := appendU32(nil, scratch)
	var b []byte
	b = append(append(b, 0x22), s...)     // local.tee scratch
	b = append(append(b, 0x23), g...)     // global.get fuel
	b = append(append(b, 0x20), s...)     // local.get scratch
	b = append(b, 0xAD, 0x42, 0x08, 0x88) // i64.extend_i32_u; i64.const 8; i64.shr_u
	b = append(b, 0x7D)                   // i64.sub
	b = append(append(b, 0x24), g...)     // global.set fuel
	b = append(append(b, 0x23), g...)     // global.get fuel
	b = append(b, 0x42, 0x00, 0x57)       // i64.const 0; i64.le_s
	return append(b, m.yieldIf()...)
}
