package main

import (
	"github.com/ledgemq/ledge/sdk/plugin"
)

func init() {
	plugin.RegisterCommitPolicy(setup)
}

func setup(p plugin.Params) (plugin.CommitPolicy, error) {
	if err := p.Only("header", "value"); err != nil {
		return nil, err
	}
	header := p.String("header", "checkpoint")
	value, checkValue := p.Get("value")
	return func(b *plugin.Batch) (plugin.Proposal, error) {
		for i := b.Len() - 1; i >= 0; i-- {
			r := b.Record(i)
			v, ok := r.HeaderValue(header)
			if ok && (!checkValue || string(v) == value) {
				return plugin.CommitThrough(r.Offset()), nil
			}
		}
		return plugin.Proposal{}, nil
	}, nil
}

func main() {}
