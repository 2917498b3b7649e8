package plugins

import (
	"fmt"
	"math"
)

// body rewrites one function body (see meter.go). at is the body's offset
// within the code section, for error messages.
func (m *meterer) body(i uint32, b []byte, at int) ([]byte, error) {
	r := &wasmReader{b: b, base: at, what: fmt.Sprintf("function %d", m.nImportFn+i)}
	t := m.types[m.funcTypes[i]]
	locals := uint64(len(t.params))
	decls := r.count(2)
	for j := uint32(0); j < decls && r.err == nil; j++ {
		locals += uint64(r.u32())
		if vt := r.byte(); r.err == nil && !isValType(vt) {
			r.fail("local of type %#x", vt)
		}
	}
	if r.err == nil && locals >= math.MaxUint32-2 {
		r.fail("%d locals", locals)
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, r.err)
	}
	declEnd := r.pos
	// Two locals are added: an i64 for the fuel check, and an i32 for the
	// length of bulk instructions when the function has any.
	tmp := uint32(locals)
	scratch := tmp + 1
	usedScratch := false
	check := m.buildCheck(tmp)

	// The check at the function's entry bounds recursion. It is left out
	// when the body reaches a loop through straight-line code, as every Go
	// function does: the loop's own check then runs on every entry.
	straight, entryCovered := true, false

	code := make([]byte, 0, len(b)+len(b)/4+len(check))
	depth := 1
	for depth > 0 && r.err == nil {
		opAt := r.pos
		op := r.byte()
		if straight {
			switch {
			case op == 0x03 && depth == 1:
				entryCovered, straight = true, false
			case op <= 0x12 || op == 0xFC: // control flow, calls, bulk instructions
				straight = false
			}
		}
		switch {
		case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0F || op == 0x1A || op == 0x1B ||
			op == 0xD1 || (op >= 0x45 && op <= 0xC4):
			// no immediates
		case op == 0x02 || op == 0x04: // block, if
			r.blockType(len(m.types))
			depth++
		case op == 0x03: // loop
			r.blockType(len(m.types))
			depth++
			code = append(code, b[opAt:r.pos]...)
			code = append(code, check...)
			continue
		case op == 0x0B: // end
			depth--
		case op == 0x0C || op == 0x0D: // br, br_if
			r.u32()
		case op == 0x0E: // br_table
			n := r.count(1)
			for k := uint32(0); k <= n && r.err == nil; k++ {
				r.u32()
			}
		case op == 0x10 || op == 0xD2: // call, ref.func: renumber
			f := r.u32()
			if r.err != nil {
				break
			}
			code = appendU32(append(code, op), m.fn(f))
			continue
		case op == 0x11: // call_indirect
			r.u32()
			r.u32()
		case op == 0x1C: // select with types
			r.bytes(uint64(r.count(1)))
		case op >= 0x20 && op <= 0x22: // local.get, local.set, local.tee
			r.u32()
		case op == 0x23 || op == 0x24: // global.get, global.set
			if g := r.u32(); r.err == nil && g >= m.nGlobals {
				r.fail("global %d out of range (%d globals)", g, m.nGlobals)
			}
		case op == 0x25 || op == 0x26: // table.get, table.set
			r.u32()
		case op >= 0x28 && op <= 0x3E: // loads and stores
			r.memarg()
		case op == 0x3F || op == 0x40: // memory.size, memory.grow
			if mi := r.byte(); r.err == nil && mi != 0 {
				r.fail("memory index %d", mi)
			}
		case op == 0x41:
			r.sleb(32)
		case op == 0x42:
			r.sleb(64)
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xD0: // ref.null
			if rt := r.byte(); r.err == nil && !isRefType(rt) {
				r.fail("ref.null of type %#x", rt)
			}
		case op == 0xFC:
			bulk := r.miscOp()
			if bulk && r.err == nil {
				code = append(code, m.bulkCharge(scratch)...)
				usedScratch = true
			}
		case op == 0xFD:
			r.vectorOp()
		default:
			r.fail("instruction %#x is not supported (threads, exceptions, tail calls and GC are off)", op)
		}
		if r.err == nil {
			code = append(code, b[opAt:r.pos]...)
		}
	}
	if r.err == nil && r.pos != len(b) {
		r.fail("%d bytes after the end of the body", len(b)-r.pos)
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, r.err)
	}

	if !entryCovered {
		code = append(check, code...)
	}
	out := make([]byte, 0, len(code)+declEnd+8)
	if usedScratch {
		out = appendU32(out, decls+2)
	} else {
		out = appendU32(out, decls+1)
	}
	out = append(out, b[lebSize(b):declEnd]...)
	out = append(out, 1, valI64)
	if usedScratch {
		out = append(out, 1, valI32)
	}
	return append(out, code...), nil
}

// lebSize returns the length of the LEB128 at the start of b.
func lebSize(b []byte) int {
	for i, c := range b {
		if c&0x80 == 0 {
			return i + 1
		}
	}
	return len(b)
}

// blockType reads a block type: empty, a value type, or a type index.
func (r *wasmReader) blockType(nTypes int) {
	c := r.peek()
	if c == 0x40 || isValType(c) {
		r.pos++
		return
	}
	if t := r.s33(); r.err == nil && (t < 0 || t >= int64(nTypes)) {
		r.fail("block type %d", t)
	}
}

// memarg reads a memory argument: alignment and offset.
func (r *wasmReader) memarg() {
	if a := r.u32(); r.err == nil && a >= 64 {
		r.fail("memory argument with alignment flags %#x (multiple memories are not supported)", a)
	}
	r.u32()
}

// miscOp reads the rest of a 0xFC-prefixed instruction and reports whether
// it is a bulk instruction whose length operand is on top of the stack.
func (r *wasmReader) miscOp() (bulk bool) {
	sub := r.u32()
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init
		r.u32()
		r.zeroByte()
		return true
	case sub == 9, sub == 13: // data.drop, elem.drop
		r.u32()
	case sub == 10: // memory.copy
		r.zeroByte()
		r.zeroByte()
		return true
	case sub == 11: // memory.fill
		r.zeroByte()
		return true
	case sub == 12, sub == 14: // table.init, table.copy
		r.u32()
		r.u32()
		return true
	case sub == 15, sub == 17: // table.grow, table.fill
		r.u32()
		return true
	case sub == 16: // table.size
		r.u32()
	default:
		r.fail("instruction 0xfc %d is not supported", sub)
	}
	return false
}

func (r *wasmReader) zeroByte() {
	if c := r.byte(); r.err == nil && c != 0 {
		r.fail("memory index %d (multiple memories are not supported)", c)
	}
}

// vectorOp reads the rest of a 0xFD-prefixed (SIMD) instruction.
func (r *wasmReader) vectorOp() {
	sub := r.u32()
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads and stores
		r.memarg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load and store lane
		r.memarg()
		r.byte()
	case sub <= 255:
		// no immediates; wazero rejects unassigned opcodes
	default:
		r.fail("vector instruction %d is not supported", sub)
	}
}
