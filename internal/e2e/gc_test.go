package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// `ledge serve` with nothing configured runs Go's collector at 400 % with
// a soft memory limit (a fleet of thousands of devices stalled in
// collections at Go's default); an operator's GOGC and GOMEMLIMIT are
// kept, and the node's own keys win over them. The node's /metrics shows
// what the runtime was set to.
func TestServeSetsTheCollector(t *testing.T) {
	bin := buildLedge(t)
	for _, tc := range []struct {
		name    string
		env     []string
		percent string
		limit   string // "" : any limit below "none"
	}{
		{"nothing set", []string{"GOGC=", "GOMEMLIMIT="}, "400", ""},
		{"Go's environment", []string{"GOGC=150", "GOMEMLIMIT=1GiB"}, "150", "1.073741824e+09"},
		{"the node's keys over Go's environment", []string{"GOGC=150", "GOMEMLIMIT=1GiB", "LEDGE_GC_PERCENT=200", "LEDGE_MEMORY_LIMIT=512MiB"}, "200", "5.36870912e+08"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newServedLedge(t, bin, filepath.Join(t.TempDir(), "ledge-data"))
			node.env = tc.env
			node.start()
			defer node.stop(syscall.SIGTERM)
			wantMetric(t, node, "go_gc_gogc_percent", tc.percent)
			if tc.limit != "" {
				wantMetric(t, node, "go_gc_gomemlimit_bytes", tc.limit)
				return
			}
			for _, l := range strings.Split(get(t, node, "/metrics"), "\n") {
				if v, ok := strings.CutPrefix(l, "go_gc_gomemlimit_bytes "); ok && v == "9.223372036854776e+18" {
					t.Errorf("the node runs with no memory limit")
				}
			}
			if !strings.Contains(node.logs.String(), "garbage collector") {
				t.Errorf("the node did not log its collector's settings:\n%s", node.logs.Tail(10))
			}
		})
	}
}
