// Package fullfs is a disk of limited size for tests: it wraps a vfs.FS
// and fails a write that would take the bytes of all files past a budget
// with ENOSPC, after writing the part that fits, as a full file system
// does. Overwriting bytes a file already holds takes no room, removing a
// file gives its bytes back, and raising the budget (SetBudget) is an
// operator freeing space. Room preallocated past a file's size (the
// metadata store's log, as fallocate with FALLOC_FL_KEEP_SIZE) is charged
// when it is taken, and writing into it later cannot fail, as on a real
// disk. It is for tests and the simulator, never for a node in
// production: `ledge serve` runs on it only when a test names a control
// file in LEDGE_TEST_DISK (cmd/ledge/testdisk.go).
package fullfs
