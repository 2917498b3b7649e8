//go:build !unix

package node

// lockHolder cannot ask the system who holds a lock here.
func lockHolder(string) (pid int, held bool) { return 0, false }
