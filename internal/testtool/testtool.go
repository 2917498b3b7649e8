package testtool

import (
	"os"
	"os/exec"
	"testing"
)

// Find returns the path of the first of names found on PATH, or "" when
// none is.
func Find(names ...string) string {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Need returns the path of the first of names found on PATH. When none is,
// it skips t with hint (say which package installs the tool), or, under CI,
// fails it.
func Need(t testing.TB, hint string, names ...string) string {
	t.Helper()
	if p := Find(names...); p != "" {
		return p
	}
	if InCI() {
		t.Fatalf("%v not on PATH under CI, where .ci/run installs it: %s", names, hint)
	}
	t.Skipf("%v not on PATH; skipping: %s", names, hint)
	return ""
}

// InCI reports whether the tests run under CI.
func InCI() bool { return os.Getenv("CI") != "" }
