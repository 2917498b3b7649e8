//go:build windows

package engine

import "syscall"

// diskFullErrnos are the errors of a write that found no room. Windows
// says ERROR_DISK_FULL (112) or ERROR_HANDLE_DISK_FULL (39), never ENOSPC
// (syscall's ENOSPC there is an invented value no call returns); quota
// exhaustion is reported as ERROR_DISK_FULL too.
var diskFullErrnos = [...]error{
	syscall.Errno(112), // ERROR_DISK_FULL
	syscall.Errno(39),  // ERROR_HANDLE_DISK_FULL
	syscall.ENOSPC,
}
