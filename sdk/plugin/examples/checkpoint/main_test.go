package main

import (
	"testing"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func TestCheckpoint(t *testing.T) {
	mark := func(off uint64, v string) plugin.TestRecord {
		return plugin.TestRecord{Offset: off, Value: []byte("x"), Headers: []plugin.TestHeader{{Key: "checkpoint", Value: []byte(v)}}}
	}
	plain := func(off uint64) plugin.TestRecord { return plugin.TestRecord{Offset: off, Value: []byte("x")} }

	for _, tc := range []struct {
		name    string
		params  map[string]string
		records []plugin.TestRecord
		want    plugin.Proposal
	}{
		{"no checkpoint", nil, []plugin.TestRecord{plain(10), plain(11)}, plugin.Proposal{}},
		{"last checkpoint wins", nil, []plugin.TestRecord{mark(10, "a"), plain(11), mark(12, "b"), plain(13)}, plugin.CommitThrough(12)},
		{"value must match", map[string]string{"value": "end"}, []plugin.TestRecord{mark(10, "end"), mark(11, "mid")}, plugin.CommitThrough(10)},
		{"other header", map[string]string{"header": "eof"}, []plugin.TestRecord{mark(10, "a")}, plugin.Proposal{}},
	} {
		got, err := plugin.RunCommitPolicy(tc.params, tc.records...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: proposal %v, want %v", tc.name, got, tc.want)
		}
	}
}
