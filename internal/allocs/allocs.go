package allocs

import (
	"runtime"
	"testing"
)

// Least runs fn once, then runs times in each of three measurements, and
// returns the fewest heap allocations and bytes per run that one of them
// saw. fn must do the same work each time. The runtime's counters are the
// whole process's, so whatever else allocates meanwhile (the runtime, the
// race detector) may inflate one measurement; it is unlikely to inflate
// all three.
func Least(runs int, fn func()) (allocs, bytes float64) {
	fn()
	allocs, bytes = measure(runs, fn)
	for range 2 {
		a, b := measure(runs, fn)
		allocs, bytes = min(allocs, a), min(bytes, b)
	}
	return allocs, bytes
}

func measure(runs int, fn func()) (allocs, bytes float64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		fn()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs), float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// SkipUnderRace skips a test that pins allocations when the race detector
// is built in: it empties pools at random, and a count taken under it
// measures the detector rather than the code.
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if Race {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
}
