// Command envelope is a map transform for the runner's benchmark and
// tests: it wraps each record's value in a JSON envelope naming the node,
// {"node":"edge-1","v":VALUE}, keeping the record's key and headers: a
// map that outputs every byte, as wrapping, re-keying or appending a field
// does, without looking at each one. The value goes out in parts (the
// prefix, the input's value, the suffix) that the plugin does not copy:
// the node joins them into the output batch.
//
// For the tests of failures, with fail=VALUE a record of that value makes
// it misbehave as fail-mode says: trap (a panic, which the host sees as a
// trap) or spin (a loop that runs until the host's deadline cuts it off).
package main

import "github.com/ledgemq/ledge/sdk/plugin"

var sink int

func init() {
	plugin.RegisterTransform(func(p plugin.Params) (plugin.Transform, error) {
		prefix := []byte(`{"node":"` + p.String("node", "edge-1") + `","v":`)
		fail, mode := p.String("fail", ""), p.String("fail-mode", "trap")
		suffix := []byte("}")
		return func(b *plugin.Batch, _ *plugin.State, out *plugin.Output) error {
			for i := 0; i < b.Len(); i++ {
				v := b.Record(i).Value()
				if fail != "" && string(v) == fail {
					if mode == "spin" {
						for {
							sink++
						}
					}
					panic("envelope: told to fail on " + fail)
				}
				out.EmitValueParts(i, prefix, v, suffix)
			}
			return nil
		}, nil
	})
}

func main() {}
