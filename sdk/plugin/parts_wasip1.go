//go:build wasip1

package plugin

import (
	"unsafe"

	"github.com/ledgemq/ledge/plugins/abi"
)

// emitParts encodes the parts as spans of the plugin's memory (ValueSpans),
// and keeps them reachable: a part the plugin drops could otherwise be
// collected, and its bytes reused, before the host reads them.
func (o *Output) emitParts(i int, timestamp int64, parts [][]byte) {
	var room [8]abi.Span
	spans := room[:0]
	if len(parts) > len(room) {
		spans = make([]abi.Span, 0, len(parts))
	}
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		spans = append(spans, abi.Span{Ptr: uint32(uintptr(unsafe.Pointer(unsafe.SliceData(p)))), Len: uint32(len(p))})
		o.parts = append(o.parts, p)
	}
	o.enc.AddSpans(i, timestamp, abi.TakeKey|abi.TakeHeaders, nil, spans)
}
