//go:build unix

package datadir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Live reports whether a node still has dir open, as the process pid
// that wrote its ListenFile: that process exists and the storage's lock
// in dir is held. A node killed before it removed its ListenFile fails
// both, unless another process has its pid since: the lock tells them
// apart. The caller's own process counts as live without asking the
// lock (a process cannot see its own lock, and closing a file of it
// would release the lock).
func Live(dir string, pid int) bool {
	switch {
	case pid <= 0:
		return false
	case pid == os.Getpid():
		return true
	case unix.Kill(pid, 0) == unix.ESRCH:
		return false
	}
	f, err := os.Open(filepath.Join(dir, LockFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false
	case err != nil:
		return true // the lock cannot be asked: the process is there
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return true // the lock cannot be asked: the process is there
	}
	return lk.Type != unix.F_UNLCK
}
