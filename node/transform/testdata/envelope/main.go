// Command envelope is a map transform for the runner's benchmark: it
// wraps each record's value in a JSON envelope naming the node,
// {"node":"edge-1","v":VALUE}, keeping the record's key and headers. A
// map that copies every byte, as wrapping, re-keying or appending a field
// does, without looking at each one.
package main

import "github.com/ledgemq/ledge/sdk/plugin"

func init() {
	plugin.RegisterTransform(func(p plugin.Params) (plugin.Transform, error) {
		prefix := []byte(`{"node":"` + p.String("node", "edge-1") + `","v":`)
		var buf []byte
		return func(b *plugin.Batch, _ *plugin.State, out *plugin.Output) error {
			for i := 0; i < b.Len(); i++ {
				buf = append(append(append(buf[:0], prefix...), b.Record(i).Value()...), '}')
				out.EmitValue(i, buf)
			}
			return nil
		}, nil
	})
}

func main() {}
