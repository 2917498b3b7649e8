// Command maptransform is a transform for the host's tests and
// benchmarks: with mode=pass it outputs every record unchanged; with
// mode=map it outputs each record with its value's ASCII letters upper
// cased (a map that touches every byte), its key and headers taken from
// the input.
package main

import (
	"encoding/binary"
	"fmt"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func init() {
	plugin.RegisterTransform(func(p plugin.Params) (plugin.Transform, error) {
		mode := p.String("mode", "pass")
		switch mode {
		case "pass":
			return func(b *plugin.Batch, _ *plugin.State, out *plugin.Output) error {
				for i := 0; i < b.Len(); i++ {
					out.Pass(i)
				}
				return nil
			}, nil
		case "map":
			return func(b *plugin.Batch, _ *plugin.State, out *plugin.Output) error {
				for i := 0; i < b.Len(); i++ {
					// The input is the plugin's own copy: upper-cased in
					// place, the value is output from where it is.
					v := b.Record(i).Value()
					upper(v)
					out.EmitValueParts(i, v)
				}
				return nil
			}, nil
		}
		return nil, fmt.Errorf("mode %q: want pass or map", mode)
	})
}

// upper upper-cases the ASCII letters of b, eight bytes a word, four
// words a step: in each byte of a word, the high bit of the sums below
// says whether its low seven bits are at least 'a' and more than 'z'; a
// letter (high bit clear) gets its 0x20 bit cleared. Bytes of 0x80 and
// up are left alone.
func upper(b []byte) {
	for len(b) >= 32 {
		w := b[:32:32]
		binary.LittleEndian.PutUint64(w[0:], upperWord(binary.LittleEndian.Uint64(w[0:])))
		binary.LittleEndian.PutUint64(w[8:], upperWord(binary.LittleEndian.Uint64(w[8:])))
		binary.LittleEndian.PutUint64(w[16:], upperWord(binary.LittleEndian.Uint64(w[16:])))
		binary.LittleEndian.PutUint64(w[24:], upperWord(binary.LittleEndian.Uint64(w[24:])))
		b = b[32:]
	}
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, upperWord(binary.LittleEndian.Uint64(b)))
		b = b[8:]
	}
	for j, c := range b {
		if c >= 'a' && c <= 'z' {
			b[j] = c - 'a' + 'A'
		}
	}
}

func upperWord(x uint64) uint64 {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	low := x &^ high
	atLeastA := low + ones*(0x80-'a')
	pastZ := low + ones*(0x80-'z'-1)
	letters := (atLeastA &^ pastZ) &^ x & high
	return x ^ letters>>2
}

func main() {}
