// Package fullfs is a disk of limited size for tests: it wraps a vfs.FS
// and fails a write that would take the bytes of all files past a budget
// with ENOSPC, after writing the part that fits, as a full file system
// does. Overwriting bytes a file already holds takes no room, removing a
// file gives its bytes back, and raising the budget (SetBudget) is an
// operator freeing space. It is for tests and the simulator, never for a
// node that serves.
package fullfs
