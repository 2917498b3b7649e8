package config

import "testing"

// A node collects at 400 % unless told otherwise, and bounds what that
// costs with a soft memory limit of three quarters of its memory. What an
// operator sets wins: the gc_percent and memory_limit keys first, then
// Go's own GOGC and GOMEMLIMIT, which the node then leaves alone.
func TestGarbageCollectorSettings(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	defaults := Defaults()
	memory := defaults.nodeMemory()
	for _, tc := range []struct {
		name    string
		args    []string
		env     func(string) (string, bool)
		percent int
		limit   int64 // -1: three quarters of the node's memory
	}{
		{"nothing set", nil, env(), 400, -1},
		{"GOGC in the environment", nil, env("GOGC", "150"), -1, -1},
		{"GOGC and GOMEMLIMIT empty, as unset", nil, env("GOGC", "", "GOMEMLIMIT", ""), 400, -1},
		{"GOGC=off in the environment", nil, env("GOGC", "off"), -1, -1},
		{"gc_percent over GOGC", []string{"--gc-percent", "200"}, env("GOGC", "150"), 200, -1},
		{"GOMEMLIMIT in the environment", nil, env("GOMEMLIMIT", "3GiB"), 400, 0},
		{"memory_limit over GOMEMLIMIT", []string{"--memory-limit", "1GiB"}, env("GOMEMLIMIT", "3GiB"), 400, 1 << 30},
	} {
		c, err := load(t, tc.args, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		g := c.gc(tc.env)
		want := tc.limit
		if want == -1 {
			want = memory / 4 * 3
		}
		if g.Percent != tc.percent || g.Limit != want {
			t.Errorf("%s: percent %d (from %s), limit %d (from %s); want %d and %d", tc.name, g.Percent, g.PercentFrom, g.Limit, g.LimitFrom, tc.percent, want)
		}
	}
	if memory > 0 && memory/4*3 <= 0 {
		t.Errorf("the node's memory, %d bytes, gave no default limit", memory)
	}
}

// gc_percent refuses what would make no sense as a target.
func TestGCPercentBounds(t *testing.T) {
	for _, v := range []string{"0", "-1", "off", "5"} {
		if _, err := load(t, []string{"--gc-percent", v}, nil); err == nil {
			t.Errorf("--gc-percent %s was accepted", v)
		}
	}
}
