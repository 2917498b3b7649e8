//go:build !unix

package datadir

// Live reports whether a node still has dir open. Without POSIX locks to
// ask, a ListenFile is believed.
func Live(dir string, pid int) bool { return pid > 0 }
