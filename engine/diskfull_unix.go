//go:build unix

package engine

import "syscall"

// diskFullErrnos are the errors of a write that found no room: the file
// system is full, or the user's quota is spent (which to the node is the
// same thing).
var diskFullErrnos = [...]error{syscall.ENOSPC, syscall.EDQUOT}
