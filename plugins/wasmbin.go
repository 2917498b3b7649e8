package plugins

import (
	"fmt"
	"math"
)

// A minimal reader and writer of the WebAssembly binary format, enough for
// the metering rewrite (meter.go). Everything it cannot follow is refused:
// the host never compiles bytes it did not understand.

// Value types.
const (
	valI32       = 0x7F
	valI64       = 0x7E
	valF32       = 0x7D
	valF64       = 0x7C
	valV128      = 0x7B
	valFuncref   = 0x70
	valExternref = 0x6F
)

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

// sectionOrder is the order non-custom sections must appear in.
var sectionOrder = [...]byte{secType, secImport, secFunction, secTable, secMemory, secGlobal,
	secExport, secStart, secElement, secDataCount, secCode, secData}

func sectionName(id byte) string {
	switch id {
	case secCustom:
		return "custom"
	case secType:
		return "type"
	case secImport:
		return "import"
	case secFunction:
		return "function"
	case secTable:
		return "table"
	case secMemory:
		return "memory"
	case secGlobal:
		return "global"
	case secExport:
		return "export"
	case secStart:
		return "start"
	case secElement:
		return "element"
	case secCode:
		return "code"
	case secData:
		return "data"
	case secDataCount:
		return "data count"
	}
	return fmt.Sprintf("section %d", id)
}

func isValType(b byte) bool {
	switch b {
	case valI32, valI64, valF32, valF64, valV128, valFuncref, valExternref:
		return true
	}
	return false
}

func isRefType(b byte) bool { return b == valFuncref || b == valExternref }

// wasmReader reads one section or body. The first error sticks; reads
// after it return zero values.
type wasmReader struct {
	b    []byte
	pos  int
	base int    // offset of b in the module, for error messages
	what string // what is being read, for error messages
	err  error
}

func (r *wasmReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at byte %d: %s", r.what, r.base+r.pos, fmt.Sprintf(format, args...))
	}
}

func (r *wasmReader) done() bool { return r.err != nil || r.pos >= len(r.b) }

func (r *wasmReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *wasmReader) peek() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	return r.b[r.pos]
}

func (r *wasmReader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.pos) {
		r.fail("%d bytes run past the end", n)
		return nil
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *wasmReader) u32() uint32 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7F) << shift
		if c&0x80 == 0 {
			if v > math.MaxUint32 {
				r.fail("integer too large")
				return 0
			}
			return uint32(v)
		}
		if shift >= 28 {
			r.fail("integer too long")
			return 0
		}
	}
}

// sleb checks a signed LEB128 of at most bits bits and returns its raw
// bytes.
func (r *wasmReader) sleb(bits uint) []byte {
	start := r.pos
	for n := uint(0); ; n += 7 {
		c := r.byte()
		if r.err != nil {
			return nil
		}
		if c&0x80 == 0 {
			return r.b[start:r.pos]
		}
		if n+7 >= bits {
			r.fail("integer too long")
			return nil
		}
	}
}

// s33 reads a signed LEB128 of at most 33 bits (a block type index).
func (r *wasmReader) s33() int64 {
	var v int64
	var shift uint
	for {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= int64(c&0x7F) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
		if shift >= 35 {
			r.fail("integer too long")
			return 0
		}
	}
}

func (r *wasmReader) name() string {
	n := r.u32()
	return string(r.bytes(uint64(n)))
}

// count reads a vector length, refusing one that cannot fit the rest of
// the input at min bytes per element.
func (r *wasmReader) count(min int) uint32 {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(min) > uint64(len(r.b)-r.pos) {
		r.fail("%d elements cannot fit %d bytes", n, len(r.b)-r.pos)
		return 0
	}
	return n
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

func appendSection(b []byte, id byte, content []byte) []byte {
	b = append(b, id)
	b = appendU32(b, uint32(len(content)))
	return append(b, content...)
}

// funcType is a function signature as raw value type bytes.
type funcType struct {
	params, results []byte
}

func (t funcType) equal(o funcType) bool {
	return string(t.params) == string(o.params) && string(t.results) == string(o.results)
}

func (t funcType) String() string {
	return "(" + valTypeList(t.params) + ") -> (" + valTypeList(t.results) + ")"
}

func valTypeList(ts []byte) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += ", "
		}
		s += valTypeName(t)
	}
	return s
}

func valTypeName(t byte) string {
	switch t {
	case valI32:
		return "i32"
	case valI64:
		return "i64"
	case valF32:
		return "f32"
	case valF64:
		return "f64"
	case valV128:
		return "v128"
	case valFuncref:
		return "funcref"
	case valExternref:
		return "externref"
	}
	return fmt.Sprintf("type(%#x)", t)
}

// sig builds a funcType from value type bytes: sig(params...)(results...).
func sig(params ...byte) func(results ...byte) funcType {
	return func(results ...byte) funcType {
		return funcType{params: params, results: results}
	}
}
