package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/sdk/plugin"
)

func TestJSONFilter(t *testing.T) {
	records := plugin.Values(
		`{"site":"lyon","temp":21}`,
		`{"site":"paris","temp":19}`,
		`not json`,
		`{"device":{"site":"lyon"},"site":"ly\u006fn"}`,
		`{"temp":21}`,
	)
	for _, mode := range []string{"native", "record", "guest"} {
		got, err := plugin.RunFilter(map[string]string{"field": "site", "equals": "lyon", "match": mode}, records...)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if want := []bool{true, false, false, true, false}; !slices.Equal(got, want) {
			t.Errorf("%s: kept %v, want %v", mode, got, want)
		}
		got, err = plugin.RunFilter(map[string]string{"field": "temp", "equals": "21", "match": mode}, records...)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if want := []bool{true, false, false, false, true}; !slices.Equal(got, want) {
			t.Errorf("%s temp: kept %v, want %v", mode, got, want)
		}
	}
}

func TestJSONFilterParams(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"equals": "x"}, `missing parameter "field"`},
		{map[string]string{"field": "x"}, `missing parameter "equals"`},
		{map[string]string{"field": "x", "equals": "y", "mode": "z"}, `unknown parameter "mode"`},
		{map[string]string{"field": "x", "equals": "y", "match": "z"}, `"match": "z"`},
	} {
		_, err := plugin.RunFilter(tc.params, plugin.Values("{}")...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to mention %s", tc.params, err, tc.want)
		}
	}
}
