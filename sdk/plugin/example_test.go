package plugin_test

import (
	"bytes"
	"fmt"

	"github.com/ledgemq/ledge/sdk/plugin"
)

// A plugin registers from init: here a record filter keeping values that
// start with a prefix, and a commit policy committing through the last
// record with an "eof" header.
func init() {
	plugin.RegisterRecordFilter(func(p plugin.Params) (plugin.RecordFilter, error) {
		prefix, err := p.Required("prefix")
		if err != nil {
			return nil, err
		}
		return func(r plugin.Record) bool {
			return bytes.HasPrefix(r.Value(), []byte(prefix))
		}, nil
	})
	plugin.RegisterCommitPolicy(func(p plugin.Params) (plugin.CommitPolicy, error) {
		return func(b *plugin.Batch) (plugin.Proposal, error) {
			for i := b.Len() - 1; i >= 0; i-- {
				if _, ok := b.Record(i).HeaderValue("eof"); ok {
					return plugin.CommitThrough(b.Record(i).Offset()), nil
				}
			}
			return plugin.Proposal{}, nil
		}, nil
	})
}

// RunFilter runs the registered filter natively, as the node would run
// the WebAssembly build.
func ExampleRunFilter() {
	kept, err := plugin.RunFilter(map[string]string{"prefix": "temp"},
		plugin.Values("temp=21", "hum=40", "temp=22")...)
	fmt.Println(kept, err)

	_, err = plugin.RunFilter(nil, plugin.Values("temp=21")...)
	fmt.Println(err)
	// Output:
	// [true false true] <nil>
	// missing parameter "prefix"
}

func ExampleRunCommitPolicy() {
	p, err := plugin.RunCommitPolicy(nil,
		plugin.TestRecord{Offset: 7, Value: []byte("a")},
		plugin.TestRecord{Offset: 8, Value: []byte("b"), Headers: []plugin.TestHeader{{Key: "eof"}}},
		plugin.TestRecord{Offset: 9, Value: []byte("c")},
	)
	fmt.Println(p, err)
	// Output: commit through 8 <nil>
}

// NativeMatchJSON decides a whole batch in one host call.
func ExampleNativeMatchJSON() {
	// Inside a batch filter: keep the records whose "site" is "lyon".
	filter := func(b *plugin.Batch, keep plugin.Bitmap) error {
		plugin.NativeMatchJSON(b, "site", "lyon", keep)
		return nil
	}
	_ = filter
	raw, ok := plugin.JSONField([]byte(`{"site":"lyon","temp":21}`), "temp")
	fmt.Println(string(raw), ok)
	// Output: 21 true
}
