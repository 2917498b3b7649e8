//go:build !linux

package plugins

// dedicatedThreads: elsewhere priorities are per process, so a worker is
// a token and the caller runs the guest.
const dedicatedThreads = false

func lowerThreadPriority() {}
