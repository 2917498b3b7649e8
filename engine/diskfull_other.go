//go:build !unix && !windows

package engine

import "syscall"

// diskFullErrnos are the errors of a write that found no room.
var diskFullErrnos = [...]error{syscall.ENOSPC}
