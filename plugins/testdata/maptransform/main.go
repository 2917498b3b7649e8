// Command maptransform is a transform for the host's tests and
// benchmarks: with mode=pass it outputs every record unchanged; with
// mode=map it outputs each record with its value's ASCII letters upper
// cased (a map that touches every byte), its key and headers taken from
// the input.
package main

import (
	"fmt"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func init() {
	plugin.RegisterTransform(func(p plugin.Params) (plugin.Transform, error) {
		mode := p.String("mode", "pass")
		var buf []byte
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
					r := b.Record(i)
					buf = append(buf[:0], r.Value()...)
					for j, c := range buf {
						if c >= 'a' && c <= 'z' {
							buf[j] = c - 'a' + 'A'
						}
					}
					out.EmitValue(i, buf)
				}
				return nil
			}, nil
		}
		return nil, fmt.Errorf("mode %q: want pass or map", mode)
	})
}

func main() {}
