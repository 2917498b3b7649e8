// Package allocs measures what a function allocates on the heap, for the
// tests that pin the allocations of a hot path (an append, serving a
// produce).
package allocs
