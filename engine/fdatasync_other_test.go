//go:build !linux

package engine

import "os"

// fdatasync falls back to a full fsync where the platform has no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }
