package main

import (
	"fmt"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func init() {
	plugin.RegisterBatchFilter(setup)
}

func setup(p plugin.Params) (plugin.BatchFilter, error) {
	if err := p.Only("field", "equals", "match"); err != nil {
		return nil, err
	}
	field, err := p.Required("field")
	if err != nil {
		return nil, err
	}
	equals, err := p.Required("equals")
	if err != nil {
		return nil, err
	}
	switch mode := p.String("match", "native"); mode {
	case "native":
		return func(b *plugin.Batch, keep plugin.Bitmap) error {
			plugin.NativeMatchJSON(b, field, equals, keep)
			return nil
		}, nil
	case "record":
		return func(b *plugin.Batch, keep plugin.Bitmap) error {
			for i := 0; i < b.Len(); i++ {
				raw, ok := plugin.NativeJSONField(b.Record(i).Value(), field)
				keep.Set(i, ok && plugin.JSONValueEquals(raw, equals))
			}
			return nil
		}, nil
	case "guest":
		return func(b *plugin.Batch, keep plugin.Bitmap) error {
			for i := 0; i < b.Len(); i++ {
				raw, ok := plugin.JSONField(b.Record(i).Value(), field)
				keep.Set(i, ok && plugin.JSONValueEquals(raw, equals))
			}
			return nil
		}, nil
	default:
		return nil, fmt.Errorf("parameter \"match\": %q (want native, record or guest)", mode)
	}
}

func main() {}
