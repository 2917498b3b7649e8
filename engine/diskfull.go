package engine

import "errors"

// IsDiskFull reports whether err says the file system has no room left
// for a write: ENOSPC, a quota exceeded (EDQUOT) where the platform has
// one, Windows' ERROR_DISK_FULL and ERROR_HANDLE_DISK_FULL, or the
// engine's own ErrNoSpace. A full disk is an expected state, never a
// failure: the write that met it is refused with ErrNoSpace (retryable)
// and nothing else changes; a failed fsync is something else (see
// ErrPartitionFailed).
func IsDiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNoSpace) {
		return true
	}
	for _, e := range diskFullErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
