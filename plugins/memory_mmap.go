//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package plugins

import "syscall"

// mapRegion reserves n bytes of private anonymous memory. The kernel
// backs a page only when the guest first touches it, and the pages read
// as zeros, as new WebAssembly pages must.
func mapRegion(n uint64) ([]byte, bool) {
	if n == 0 || n > 1<<32 {
		return nil, false
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, false
	}
	return b, true
}

// unmapRegion gives a region back to the operating system.
func unmapRegion(b []byte) { _ = syscall.Munmap(b) }
