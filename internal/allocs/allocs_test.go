package allocs

import "testing"

var sink []byte

// Least reports what each run allocates, not what the first one did.
func TestLeastCountsPerRun(t *testing.T) {
	first := true
	a, b := Least(100, func() {
		if first {
			first = false
			sink = make([]byte, 1<<20) // a warm-up's allocation is not counted
		}
		sink = make([]byte, 4096)
	})
	if a < 1 || a > 1.5 || b < 4096 || b > 4096*1.5 {
		t.Fatalf("Least = %.2f allocations, %.0f bytes per run; want about 1 and 4096", a, b)
	}
}
