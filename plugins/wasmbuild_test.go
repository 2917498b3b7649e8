package plugins

// A small WebAssembly module builder for tests that need modules no
// toolchain would produce.

type tImport struct {
	module, name string
	typ          funcType
}

type tFunc struct {
	typ    funcType
	locals []byte // value types, one local each
	body   []byte // instructions, without the final end
	export string
}

type tModule struct {
	imports    []tImport
	funcs      []tFunc
	memPages   uint32 // 0: no memory
	exportMem  bool
	data       []tData
	rawExtra   []byte // appended as is (e.g. a custom section)
	startIndex int    // function index of a start section, -1 none
}

type tData struct {
	offset int32
	bytes  []byte
}

func (m *tModule) encode() []byte {
	var types []funcType
	typeIndex := func(t funcType) uint32 {
		for i, x := range types {
			if x.equal(t) {
				return uint32(i)
			}
		}
		types = append(types, t)
		return uint32(len(types) - 1)
	}
	var imports, funcs, exports, code []byte
	nExports := 0
	for _, im := range m.imports {
		imports = appendName(imports, im.module)
		imports = appendName(imports, im.name)
		imports = append(imports, 0)
		imports = appendU32(imports, typeIndex(im.typ))
	}
	for i, f := range m.funcs {
		funcs = appendU32(funcs, typeIndex(f.typ))
		if f.export != "" {
			exports = appendName(exports, f.export)
			exports = append(exports, 0)
			exports = appendU32(exports, uint32(len(m.imports)+i))
			nExports++
		}
		var body []byte
		body = appendU32(body, uint32(len(f.locals)))
		for _, l := range f.locals {
			body = append(body, 1, l)
		}
		body = append(body, f.body...)
		body = append(body, 0x0B)
		code = appendU32(code, uint32(len(body)))
		code = append(code, body...)
	}
	if m.exportMem {
		exports = appendName(exports, "memory")
		exports = append(exports, 2, 0)
		nExports++
	}
	var typeSec []byte
	typeSec = appendU32(typeSec, uint32(len(types)))
	for _, t := range types {
		typeSec = append(typeSec, 0x60)
		typeSec = appendU32(typeSec, uint32(len(t.params)))
		typeSec = append(typeSec, t.params...)
		typeSec = appendU32(typeSec, uint32(len(t.results)))
		typeSec = append(typeSec, t.results...)
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = appendSection(out, secType, typeSec)
	if len(m.imports) > 0 {
		out = appendSection(out, secImport, append(appendU32(nil, uint32(len(m.imports))), imports...))
	}
	out = appendSection(out, secFunction, append(appendU32(nil, uint32(len(m.funcs))), funcs...))
	if m.memPages > 0 {
		out = appendSection(out, secMemory, appendU32([]byte{1, 0}, m.memPages))
	}
	out = appendSection(out, secExport, append(appendU32(nil, uint32(nExports)), exports...))
	if m.startIndex >= 0 {
		out = appendSection(out, secStart, appendU32(nil, uint32(m.startIndex)))
	}
	out = appendSection(out, secCode, append(appendU32(nil, uint32(len(m.funcs))), code...))
	if len(m.data) > 0 {
		var d []byte
		d = appendU32(d, uint32(len(m.data)))
		for _, seg := range m.data {
			d = append(d, 0, 0x41)
			d = appendS64(d, int64(seg.offset))
			d = append(d, 0x0B)
			d = appendU32(d, uint32(len(seg.bytes)))
			d = append(d, seg.bytes...)
		}
		out = appendSection(out, secData, d)
	}
	return append(out, m.rawExtra...)
}

// Instruction helpers.
func i32c(v int32) []byte      { return appendS64([]byte{0x41}, int64(v)) }
func localGet(i uint32) []byte { return appendU32([]byte{0x20}, i) }
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

const (
	opUnreachable = 0x00
	opLoop        = 0x03
	opBr          = 0x0C
	opBrIf        = 0x0D
	opEnd         = 0x0B
	opCall        = 0x10
	opDrop        = 0x1A
	opI32Load     = 0x28
	opI32Store8   = 0x3A
	opI32Store    = 0x36
	opMemorySize  = 0x3F
	opMemoryGrow  = 0x40
	opI32Add      = 0x6A
	opI32Ne       = 0x47
	opI32Mul      = 0x6C
	blockEmpty    = 0x40
)

var (
	tI32 = byte(valI32)
	// loopForever is: loop br 0 end.
	loopForever = []byte{opLoop, blockEmpty, opBr, 0, opEnd}
)

// abiModule returns a module implementing the ABI skeleton (version,
// buffer at 1024 in a memory of pages pages, init returning 0) with the
// given filter and propose bodies (nil: no such export). Both take
// (ptr, len) as locals 0 and 1 and return an i32.
func abiModule(filter, propose []byte) *tModule {
	m := &tModule{memPages: 4, exportMem: true, startIndex: -1}
	m.funcs = []tFunc{
		{typ: sig()(tI32), body: i32c(1), export: "ledge_abi_version"},
		{typ: sig(tI32)(tI32), body: i32c(1024), export: "ledge_buffer"},
		{typ: sig(tI32, tI32, tI32)(tI32), body: i32c(0), export: "ledge_init"},
	}
	if filter != nil {
		m.funcs = append(m.funcs, tFunc{typ: sig(tI32, tI32)(tI32), body: filter, export: "ledge_filter"})
	}
	if propose != nil {
		m.funcs = append(m.funcs, tFunc{typ: sig(tI32, tI32)(tI32), body: propose, export: "ledge_propose"})
	}
	return m
}

// answerAddr pushes ptr + the answer offset of the input region.
var answerAddr = cat(localGet(0), localGet(0), []byte{opI32Load, 2, 56}, []byte{opI32Add})

// bitmapSizeOfInput pushes (count+7)/8 of the input region.
var bitmapSizeOfInput = cat(localGet(0), []byte{opI32Load, 2, 12}, i32c(7), []byte{opI32Add}, i32c(3), []byte{0x76}) // i32.shr_u
