//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package plugins

// mapRegion is not available: guest memory lives on the Go heap, and a
// closed instance's memory goes back with the garbage collector.
func mapRegion(uint64) ([]byte, bool) { return nil, false }

func unmapRegion([]byte) {}
