package main

import "testing"

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "record", "1 record"},
		{0, "record", "0 records"},
		{5, "record", "5 records"},
		{2, "policy", "2 policies"},
		{2, "key", "2 keys"},
		{3, "batch", "3 batches"},
	} {
		if got := plural(tc.n, tc.noun); got != tc.want {
			t.Errorf("plural(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}
