package main

import (
	"slices"
	"testing"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func TestSampleEvery(t *testing.T) {
	got, err := plugin.RunFilter(map[string]string{"every": "3"}, plugin.Values("a", "b", "c", "d", "e", "f", "g")...)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, false, true, false, false, true}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
}

func TestSampleRate(t *testing.T) {
	records := make([]plugin.TestRecord, 1000)
	for i := range records {
		records[i] = plugin.TestRecord{Offset: uint64(i), Value: []byte("x")}
	}
	for _, tc := range []struct {
		rate     string
		min, max int
	}{{"0", 0, 0}, {"1", 1000, 1000}, {"0.5", 400, 600}} {
		got, err := plugin.RunFilter(map[string]string{"rate": tc.rate}, records...)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range got {
			if k {
				n++
			}
		}
		if n < tc.min || n > tc.max {
			t.Errorf("rate %s kept %d of 1000, want %d to %d", tc.rate, n, tc.min, tc.max)
		}
	}
}

func TestSampleParams(t *testing.T) {
	for _, params := range []map[string]string{
		{"rate": "2"}, {"rate": "x"}, {"every": "0"}, {"every": "2", "rate": "0.5"}, {"ratio": "1"},
	} {
		if _, err := plugin.RunFilter(params, plugin.Values("a")...); err == nil {
			t.Errorf("%v: no error", params)
		}
	}
}
