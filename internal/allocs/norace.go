//go:build !race

package allocs

// Race is whether the race detector is built in. Under it, sync.Pool
// drops a share of what is put back at random and the detector allocates
// for itself, so allocation counts say nothing about the code.
const Race = false
