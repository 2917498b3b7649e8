package node

import (
	"github.com/ledgemq/ledge/node/ops"
	"net/http"
	"strings"
	"testing"
)

// TestHTTPPprofIsOptIn: the profiler is not served by default, and is
// served under /debug/pprof/ when asked for.
func TestHTTPPprofIsOptIn(t *testing.T) {
	off := newOpsServer(t, ops.HTTPConfig{})
	if code, _ := off.get(t, "/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without Pprof: status %d, want 404", code)
	}
	on := newOpsServer(t, ops.HTTPConfig{Pprof: true})
	code, body := on.get(t, "/debug/pprof/")
	if code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ with Pprof: status %d, body %.200q", code, body)
	}
	if code, body := on.get(t, "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("goroutine profile: status %d, body %.200q", code, body)
	}
}
