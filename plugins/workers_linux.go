package plugins

import "syscall"

// dedicatedThreads: Linux gives each thread its own priority.
const dedicatedThreads = true

// lowerThreadPriority lowers the priority of the calling thread (only:
// on Linux, PRIO_PROCESS with a thread id names that thread). Failing
// leaves it as it was.
func lowerThreadPriority() {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), workerNice)
}
