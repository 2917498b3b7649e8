// Command checkpoint is a Ledge commit policy: it commits only through the
// last record marked as a checkpoint, so that a consumer restarting after a
// crash resumes at a record boundary its application chose (the end of a
// transaction, a file, a frame), never in the middle.
//
// A record is a checkpoint when it carries the header named by "header"
// (default "checkpoint"); with "value", the header must also have that
// value. A poll without a checkpoint proposes nothing: the committed
// position stays where it was.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o checkpoint.wasm .
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
