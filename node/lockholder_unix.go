//go:build unix

package node

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockHolder reports whether another process holds the POSIX lock on
// path, and its pid when the system tells it (0 otherwise).
func lockHolder(path string) (pid int, held bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return 0, false
	}
	if lk.Type == unix.F_UNLCK {
		return 0, false
	}
	return int(lk.Pid), true
}
