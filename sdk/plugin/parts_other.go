//go:build !wasip1

package plugin

import "github.com/ledgemq/ledge/plugins/abi"

// emitParts joins the parts into the answer: a native build has no
// linear memory for the host to read them from.
func (o *Output) emitParts(i int, timestamp int64, parts [][]byte) {
	v := o.joined[:0]
	if v == nil {
		v = []byte{} // an empty value, not a null one
	}
	for _, p := range parts {
		v = append(v, p...)
	}
	o.joined = v
	o.enc.AddInput(i, timestamp, abi.TakeKey|abi.TakeHeaders, nil, v)
}
