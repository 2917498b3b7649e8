package main

import (
	"fmt"
	"testing"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func rec(off uint64, ts int64, key string) plugin.TestRecord {
	return plugin.TestRecord{Offset: off, Timestamp: ts, Key: []byte(key), Value: []byte("x")}
}

func show(outs []plugin.TestOutput) []string {
	var s []string
	for _, o := range outs {
		s = append(s, fmt.Sprintf("%d@%d %s %s", o.Input, o.Timestamp, o.Key, o.Value))
	}
	return s
}

// Counts carry over from one batch to the next through the state alone,
// and a minute's counts come out when a later minute starts.
func TestPerMinute(t *testing.T) {
	const m = 60_000
	outs, state, err := plugin.RunTransform(nil, nil, rec(0, 1*m+1, "a"), rec(1, 1*m+2, "b"), rec(2, 1*m+3, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 0 || len(state) == 0 {
		t.Fatalf("first batch: outputs %v, state %d bytes", show(outs), len(state))
	}
	outs, state, err = plugin.RunTransform(nil, state, rec(3, 1*m+500, "b"), rec(4, 2*m, "a"), rec(5, 1*m+7, "late"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`1@119999 a {"minute":60000,"key":"a","count":2}`,
		`1@119999 b {"minute":60000,"key":"b","count":2}`,
	}
	if got := show(outs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("second batch:\n got %q\nwant %q", got, want)
	}
	outs, _, err = plugin.RunTransform(nil, state, rec(6, 3*m, "z"))
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		`0@179999 a {"minute":120000,"key":"a","count":1}`,
		`0@179999 late {"minute":120000,"key":"late","count":1}`,
	}
	if got := show(outs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("third batch:\n got %q\nwant %q", got, want)
	}
	if _, _, err := plugin.RunTransform(nil, []byte("garbage"), rec(0, 0, "a")); err == nil {
		t.Error("a state the plugin did not write was accepted")
	}
	if _, _, err := plugin.RunTransform(map[string]string{"window": "0"}, nil, rec(0, 0, "a")); err == nil {
		t.Error("window=0 accepted")
	}
}
