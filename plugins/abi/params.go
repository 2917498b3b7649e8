package abi

import (
	"errors"
	"fmt"
)

// ErrBadParams reports parameters that cannot be encoded or decoded.
var ErrBadParams = errors.New("abi: malformed parameters")

// Param is one key=value parameter given to a plugin's init.
type Param struct {
	Key   string
	Value string
}

// Parameter encoding, as passed to ExportInit:
//
//	count u32 | (keyLen u32 | key | valueLen u32 | value) × count
//
// Keys are unique, sorted by byte value, and non-empty.

// AppendParams appends the encoding of params, in their order, to dst.
func AppendParams(dst []byte, params []Param) []byte {
	dst = le.AppendUint32(dst, uint32(len(params)))
	for _, p := range params {
		dst = le.AppendUint32(dst, uint32(len(p.Key)))
		dst = append(dst, p.Key...)
		dst = le.AppendUint32(dst, uint32(len(p.Value)))
		dst = append(dst, p.Value...)
	}
	return dst
}

// DecodeParams decodes an encoding made by AppendParams.
func DecodeParams(b []byte) ([]Param, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadParams, len(b))
	}
	n := le.Uint32(b)
	b = b[4:]
	if uint64(n)*8 > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d parameters cannot fit %d bytes", ErrBadParams, n, len(b))
	}
	out := make([]Param, 0, n)
	for i := uint32(0); i < n; i++ {
		var k, v string
		var ok bool
		if k, b, ok = lenString(b); !ok {
			return nil, fmt.Errorf("%w: parameter %d key", ErrBadParams, i)
		}
		if v, b, ok = lenString(b); !ok {
			return nil, fmt.Errorf("%w: parameter %d value", ErrBadParams, i)
		}
		out = append(out, Param{Key: k, Value: v})
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last parameter", ErrBadParams, len(b))
	}
	return out, nil
}

func lenString(b []byte) (string, []byte, bool) {
	if len(b) < 4 {
		return "", b, false
	}
	n := le.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return "", b, false
	}
	return string(b[4 : 4+n]), b[4+n:], true
}
