package plugins

import "fmt"

// The section-by-section work of the metering rewrite (meter.go).

func (m *meterer) typeSection(b []byte) ([]byte, error) {
	r := &wasmReader{b: b, what: "type section"}
	var n uint32
	if b != nil {
		n = r.count(3)
	}
	body := r.pos
	for i := uint32(0); i < n && r.err == nil; i++ {
		if f := r.byte(); f != 0x60 {
			r.fail("type %d has form %#x, only function types are supported", i, f)
			break
		}
		var t funcType
		t.params = r.bytes(uint64(r.count(1)))
		t.results = r.bytes(uint64(r.count(1)))
		for _, v := range t.params {
			if !isValType(v) {
				r.fail("type %d: unknown value type %#x", i, v)
			}
		}
		for _, v := range t.results {
			if !isValType(v) {
				r.fail("type %d: unknown value type %#x", i, v)
			}
		}
		m.types = append(m.types, t)
	}
	if err := finish(r); err != nil {
		return nil, err
	}
	// The yield's type, () -> i64: reuse an equal one or append it.
	yt := sig()(valI64)
	for i, t := range m.types {
		if t.equal(yt) {
			m.yieldType = uint32(i)
			return b, nil
		}
	}
	m.yieldType = uint32(len(m.types))
	m.types = append(m.types, yt)
	out := appendU32(nil, uint32(len(m.types)))
	out = append(out, b[body:]...)
	return append(out, 0x60, 0, 1, valI64), nil
}

// finish turns a reader's error, or bytes left over, into ErrInvalidModule.
func finish(r *wasmReader) error {
	if r.err == nil && r.pos != len(r.b) {
		r.fail("%d unexpected trailing bytes", len(r.b)-r.pos)
	}
	if r.err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidModule, r.err)
	}
	return nil
}

func (m *meterer) importSection(b []byte) ([]byte, error) {
	r := &wasmReader{b: b, what: "import section"}
	var n uint32
	if b != nil {
		n = r.count(4)
	}
	body := r.pos
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod, name := r.name(), r.name()
		kind := r.byte()
		if r.err != nil {
			break
		}
		if kind != 0 {
			what := map[byte]string{1: "a table", 2: "a memory", 3: "a global", 4: "a tag"}[kind]
			if what == "" {
				what = fmt.Sprintf("an import of kind %d", kind)
			}
			return nil, fmt.Errorf("%w: %q.%q is %s; plugins may import only functions (from %q and %q)",
				ErrImportRefused, mod, name, what, hostModuleName, wasiModuleName)
		}
		ti := r.u32()
		if r.err == nil && ti >= uint32(len(m.types)) {
			r.fail("import %q.%q: type index %d out of range", mod, name, ti)
		}
		if r.err != nil {
			break
		}
		typ := m.types[ti]
		if mod == meterModule {
			return nil, fmt.Errorf("%w: %q.%q: module %q is reserved for the host", ErrImportRefused, mod, name, meterModule)
		}
		if err := m.importAllow(mod, name, typ); err != nil {
			return nil, err
		}
		m.info.imports = append(m.info.imports, importInfo{module: mod, name: name, typ: typ})
		m.nImportFn++
	}
	if err := finish(r); err != nil {
		return nil, err
	}
	m.yieldFn = m.nImportFn
	out := appendU32(nil, n+1)
	out = append(out, b[body:]...)
	out = appendName(out, meterModule)
	out = appendName(out, meterYield)
	out = append(out, 0)
	return appendU32(out, m.yieldType), nil
}

// fn maps a function index of the original module to the rewritten one.
func (m *meterer) fn(i uint32) uint32 {
	if i >= m.nImportFn {
		return i + 1
	}
	return i
}

func (m *meterer) functionSection(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	r := &wasmReader{b: b, what: "function section"}
	n := r.count(1)
	for i := uint32(0); i < n && r.err == nil; i++ {
		t := r.u32()
		if r.err == nil && t >= uint32(len(m.types)) {
			r.fail("function %d: type index %d out of range", i, t)
		}
		m.funcTypes = append(m.funcTypes, t)
	}
	return b, finish(r)
}

// limits reads table or memory limits.
func (r *wasmReader) limits() (min, max uint32, hasMax bool) {
	switch flag := r.byte(); flag {
	case 0:
		return r.u32(), 0, false
	case 1:
		min, max = r.u32(), r.u32()
		return min, max, true
	default:
		r.fail("limits flag %#x (shared or 64-bit memories and tables are not supported)", flag)
		return 0, 0, false
	}
}

func (m *meterer) tableSection(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	r := &wasmReader{b: b, what: "table section"}
	n := r.count(3)
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		rt := r.byte()
		if r.err == nil && !isRefType(rt) {
			r.fail("table %d: element type %#x", i, rt)
		}
		min, max, hasMax := r.limits()
		if r.err != nil {
			break
		}
		if min > maxTableElements {
			return nil, fmt.Errorf("%w: table %d starts with %d elements, the limit is %d", ErrInvalidModule, i, min, maxTableElements)
		}
		if !hasMax || max > maxTableElements {
			max = maxTableElements
		}
		out = append(out, rt, 1)
		out = appendU32(out, min)
		out = appendU32(out, max)
	}
	return out, finish(r)
}

func (m *meterer) memorySection(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	r := &wasmReader{b: b, what: "memory section"}
	n := r.count(2)
	if r.err == nil && n > 1 {
		r.fail("%d memories (at most one is supported)", n)
	}
	if n == 1 {
		min, max, hasMax := r.limits()
		m.info.memory = &memoryInfo{min: min, max: max, hasMax: hasMax}
	}
	return b, finish(r)
}

func (m *meterer) globalSection(b []byte) ([]byte, error) {
	r := &wasmReader{b: b, what: "global section"}
	var n uint32
	if b != nil {
		n = r.count(3)
	}
	out := appendU32(nil, n+1)
	for i := uint32(0); i < n && r.err == nil; i++ {
		vt, mut := r.byte(), r.byte()
		if r.err == nil && (!isValType(vt) || mut > 1) {
			r.fail("global %d: type %#x mutability %d", i, vt, mut)
		}
		out = append(out, vt, mut)
		// A global's initializer may read only earlier globals; the
		// rewrite checks what it can and wazero validates the rest.
		out = m.constExpr(r, out, i)
	}
	if err := finish(r); err != nil {
		return nil, err
	}
	m.nGlobals = n // globals cannot be imported (importSection refuses them)
	m.fuelGlobal = n
	out = append(out, valI64, 1, 0x42)
	out = appendS64(out, meterSlice)
	out = append(out, 0x0B)
	return out, nil
}

// constExpr copies a constant expression from r to out, renumbering
// ref.func. nGlobals is the number of globals the expression may read.
func (m *meterer) constExpr(r *wasmReader, out []byte, nGlobals uint32) []byte {
	for r.err == nil {
		op := r.byte()
		switch op {
		case 0x0B:
			return append(out, op)
		case 0x41:
			out = append(append(out, op), r.sleb(32)...)
		case 0x42:
			out = append(append(out, op), r.sleb(64)...)
		case 0x43:
			out = append(append(out, op), r.bytes(4)...)
		case 0x44:
			out = append(append(out, op), r.bytes(8)...)
		case 0x23:
			g := r.u32()
			if r.err == nil && g >= nGlobals {
				r.fail("constant expression reads global %d of %d", g, nGlobals)
			}
			out = appendU32(append(out, op), g)
		case 0xD0:
			out = append(out, op, r.byte())
		case 0xD2:
			out = appendU32(append(out, op), m.fn(r.u32()))
		case 0x6A, 0x6B, 0x6C, 0x7C, 0x7D, 0x7E: // extended constant arithmetic
			out = append(out, op)
		case 0xFD:
			if sub := r.u32(); sub != 12 {
				r.fail("vector instruction %d in a constant expression", sub)
			}
			out = append(append(out, op, 12), r.bytes(16)...)
		default:
			r.fail("instruction %#x in a constant expression", op)
		}
	}
	return out
}

func (m *meterer) exportSection(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	r := &wasmReader{b: b, what: "export section"}
	n := r.count(3)
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		name := r.name()
		kind := r.byte()
		idx := r.u32()
		if r.err != nil {
			break
		}
		if _, dup := m.info.exports[name]; dup {
			r.fail("export %q repeated", name)
			break
		}
		e := exportInfo{kind: kind}
		if kind == 0 {
			t, ok := m.funcType(idx)
			if !ok {
				r.fail("export %q: function %d out of range", name, idx)
				break
			}
			e.typ = t
			idx = m.fn(idx)
		}
		m.info.exports[name] = e
		out = appendName(out, name)
		out = append(out, kind)
		out = appendU32(out, idx)
	}
	return out, finish(r)
}

// funcType returns the type of function i of the original module.
func (m *meterer) funcType(i uint32) (funcType, bool) {
	if i < m.nImportFn {
		return m.info.imports[i].typ, true
	}
	i -= m.nImportFn
	if i >= uint32(len(m.funcTypes)) {
		return funcType{}, false
	}
	return m.types[m.funcTypes[i]], true
}

func (m *meterer) startSection(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	r := &wasmReader{b: b, what: "start section"}
	f := r.u32()
	return appendU32(nil, m.fn(f)), finish(r)
}

func (m *meterer) elementSection(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	r := &wasmReader{b: b, what: "element section"}
	n := r.count(2)
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		if r.err == nil && flags > 7 {
			r.fail("element segment %d: flags %d", i, flags)
			break
		}
		out = appendU32(out, flags)
		if flags&2 != 0 && flags&1 == 0 { // explicit table index
			out = appendU32(out, r.u32())
		}
		if flags&1 == 0 { // active: offset expression
			out = m.constExpr(r, out, m.nGlobals)
		}
		if flags&3 != 0 { // element kind (0x00) or reference type
			out = append(out, r.byte())
		}
		cnt := r.count(1)
		out = appendU32(out, cnt)
		for j := uint32(0); j < cnt && r.err == nil; j++ {
			if flags&4 == 0 {
				out = appendU32(out, m.fn(r.u32()))
			} else {
				out = m.constExpr(r, out, m.nGlobals)
			}
		}
	}
	return out, finish(r)
}

func (m *meterer) codeSection(b []byte) ([]byte, error) {
	r := &wasmReader{b: b, what: "code section"}
	var n uint32
	if b != nil {
		n = r.count(2)
	}
	if r.err == nil && n != uint32(len(m.funcTypes)) {
		r.fail("%d bodies for %d functions", n, len(m.funcTypes))
	}
	out := appendU32(make([]byte, 0, len(b)+len(b)/4), n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		at := r.pos
		body := r.bytes(uint64(size))
		if r.err != nil {
			break
		}
		nb, err := m.body(i, body, at)
		if err != nil {
			return nil, err
		}
		out = appendU32(out, uint32(len(nb)))
		out = append(out, nb...)
	}
	if err := finish(r); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, nil
	}
	return out, nil
}

// nameSection renumbers the function names of a "name" custom section and
// keeps the module name; other subsections (locals, labels) are dropped.
// A name section it cannot read is dropped: it only serves error messages.
func (m *meterer) nameSection(b []byte) []byte {
	r := &wasmReader{b: b, what: "name section"}
	var out []byte
	for !r.done() {
		id := r.byte()
		sub := r.bytes(uint64(r.u32()))
		if r.err != nil {
			return nil
		}
		switch id {
		case 0:
			out = appendSection(out, id, sub)
		case 1:
			sr := &wasmReader{b: sub, what: "function names"}
			n := sr.count(2)
			fn := appendU32(nil, n)
			for i := uint32(0); i < n && sr.err == nil; i++ {
				fn = appendU32(fn, m.fn(sr.u32()))
				fn = appendName(fn, sr.name())
			}
			if sr.err != nil {
				return nil
			}
			out = appendSection(out, id, fn)
		}
	}
	return out
}
