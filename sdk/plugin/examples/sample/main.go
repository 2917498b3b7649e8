package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func init() {
	plugin.RegisterBatchFilter(setup)
}

func setup(p plugin.Params) (plugin.BatchFilter, error) {
	if err := p.Only("rate", "every"); err != nil {
		return nil, err
	}
	if _, ok := p.Get("every"); ok {
		if _, ok := p.Get("rate"); ok {
			return nil, fmt.Errorf("give either \"rate\" or \"every\", not both")
		}
		every, err := p.Int("every", 1)
		if err != nil {
			return nil, err
		}
		if every < 1 {
			return nil, fmt.Errorf("parameter \"every\": %d, want 1 or more", every)
		}
		return func(b *plugin.Batch, keep plugin.Bitmap) error {
			for i := 0; i < b.Len(); i++ {
				keep.Set(i, b.Record(i).Offset()%uint64(every) == 0)
			}
			return nil
		}, nil
	}
	rate, err := p.Float("rate", 0.1)
	if err != nil {
		return nil, err
	}
	if rate < 0 || rate > 1 {
		return nil, fmt.Errorf("parameter \"rate\": %v, want 0 to 1", rate)
	}
	return func(b *plugin.Batch, keep plugin.Bitmap) error {
		for i := 0; i < b.Len(); i++ {
			keep.Set(i, rand.Float64() < rate)
		}
		return nil
	}, nil
}

func main() {}
